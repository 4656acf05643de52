package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
)

// Compiled is one compiled policy revision: its modules and its data. The
// decision log evaluates the user's data.system.log.mask and
// data.system.log.drop rules against it, so masking follows the very
// policy that decided the call. Both are shared and must be treated as
// read-only.
type Compiled struct {
	Revision string
	Compiler *ast.Compiler
	Store    storage.Store
}

// Compiled returns the revision in force. A Reload swaps it whole: a new
// revision has a new Compiler, so comparing Compiler pointers tells a
// caller whether it changed.
func (e *Engine) Compiled() Compiled {
	p := e.current.Load()
	return Compiled{Revision: p.revision, Compiler: p.compiler, Store: p.store}
}
