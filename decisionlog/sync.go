package decisionlog

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/storage"
)

// sync gives the plugin manager the policy revision in force, if it is not
// the one it has. It writes the revision's data to the manager's store in
// a transaction that carries the revision's compiler, as OPA's bundle
// plugin activates a bundle: on commit the manager takes the compiler and
// the plugin drops its prepared mask and drop queries. Only the worker
// calls it, so events and revisions never interleave.
func (l *Logger) sync(ctx context.Context) error {
	c := l.opts.Policy()
	if c.Compiler == l.synced {
		return nil
	}
	data, err := storage.ReadOne(ctx, c.Store, storage.RootPath)
	if err != nil {
		return fmt.Errorf("reading policy data: %w", err)
	}
	if v, ok := data.(ast.Value); ok {
		if data, err = ast.JSON(v); err != nil {
			return fmt.Errorf("reading policy data: %w", err)
		}
	}
	params := storage.TransactionParams{Write: true, Context: storage.NewContext()}
	plugins.SetCompilerOnContext(params.Context, c.Compiler)
	err = storage.Txn(ctx, l.manager.Store, params, func(txn storage.Transaction) error {
		return l.manager.Store.Write(ctx, txn, storage.ReplaceOp, storage.RootPath, data)
	})
	if err != nil {
		return fmt.Errorf("loading policy revision %s: %w", c.Revision, err)
	}
	l.synced = c.Compiler
	plain, err := plainPolicy(ctx, c.Compiler, c.Store, l.maskPath(), l.dropPath())
	if err != nil {
		return fmt.Errorf("reading policy data: %w", err)
	}
	l.direct = plain && l.opts.Service.URL == ""
	return nil
}
