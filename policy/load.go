package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
)

// bundle is one complete policy: every module and the data document. It is
// built whole and then swapped in, so no call ever sees half of a reload.
type bundle struct {
	modules map[string]*ast.Module
	// library is the shipped library's modules by their text: a copy of
	// one among the user's policies (a checkout's rego/, whose lib/ is
	// the library) is read once, from the library (libraryCopy).
	library  map[string]bool
	data     map[string]any
	revision string
	// rules is the table read from the rules file (rulesFromFile), kept
	// beside its data form for the library's Go evaluation.
	rules         []Rule
	rulesFromFile bool
}

// load reads the library, the user's policies and the rules table.
func load(opts *Options) (*bundle, error) {
	b := &bundle{modules: map[string]*ast.Module{}, data: map[string]any{}, library: map[string]bool{}}
	h := sha256.New()
	if opts.Library != nil {
		if err := b.addFS("lib", opts.Library, h); err != nil {
			return nil, fmt.Errorf("shipped library: %w", err)
		}
	}
	if opts.Policies != nil {
		if err := b.addFS("policy", opts.Policies, h); err != nil {
			return nil, err
		}
		tg, _ := b.data["toolgate"].(map[string]any)
		if _, has := tg["rules_index"]; has {
			// The library picks a call's rows from the index when there
			// is one: a data file's would be rows nothing checked.
			return nil, errors.New("data.toolgate.rules_index is toolgate's own, written from the rules table; remove it from your data files")
		}
		if _, has := tg["rules_checked"]; has {
			return nil, errors.New("data.toolgate.rules_checked is toolgate's own; remove it from your data files")
		}
	}
	if opts.RulesFile != "" {
		src, err := os.ReadFile(opts.RulesFile)
		if err != nil {
			return nil, fmt.Errorf("rules file: %w", err)
		}
		rules, err := ParseRules(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", opts.RulesFile, err)
		}
		if err := b.setRules(rules); err != nil {
			return nil, err
		}
		b.rules, b.rulesFromFile = rules, true
		h.Write(src)
	}
	if !b.rulesFromFile {
		composeDataRows(b.data)
	}
	b.revision = hex.EncodeToString(h.Sum(nil))[:16]
	return b, nil
}

// composeDataRows composes the targets of a rules table served from a data
// file (data.toolgate.rules), as ParseRules does a rules file's: calls'
// targets are composed (target.go), and a row written decomposed would
// otherwise match neither spelling.
func composeDataRows(data map[string]any) {
	tg, _ := data["toolgate"].(map[string]any)
	compose := func(r any) {
		if row, ok := r.(map[string]any); ok {
			if target, ok := row["target"].(string); ok {
				row["target"] = composed(target)
			}
		}
	}
	switch rows := tg["rules"].(type) {
	case []any: // the library reads the table as an array or an object
		for _, r := range rows {
			compose(r)
		}
	case map[string]any:
		for _, r := range rows {
			compose(r)
		}
	}
}

// addFS loads every .rego module (except *_test.rego) and every .json and
// .yaml data file under fsys, with OPA's usual layout: a data file's
// directory is its path under data.
func (b *bundle) addFS(prefix string, fsys fs.FS, h interface{ Write([]byte) (int, error) }) error {
	res, err := loader.NewFileLoader().
		WithFS(fsys).
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true).
		Filtered([]string{"."}, skipNonPolicy)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(res.Modules))
	for name := range res.Modules {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := res.Modules[name]
		if prefix == "lib" {
			b.library[string(m.Raw)] = true
		} else if b.library[string(m.Raw)] {
			continue // a copy of the library's own file
		}
		key := prefix + "/" + strings.TrimPrefix(name, "/")
		b.modules[key] = m.Parsed
		h.Write([]byte(key))
		h.Write(m.Raw)
	}
	if len(res.Documents) > 0 {
		doc, err := json.Marshal(res.Documents)
		if err != nil {
			return err
		}
		h.Write(doc)
		for k, v := range res.Documents {
			if _, dup := b.data[k]; dup {
				return fmt.Errorf("data document %q is defined twice", k)
			}
			b.data[k] = v
		}
	}
	return nil
}

// skipNonPolicy keeps .rego (not _test.rego), .json, .yaml and .yml files
// and skips hidden entries, except that Kubernetes' ConfigMap layout (a
// "..data" symlink to a "..<timestamp>" directory) is read through its
// top-level symlinks only.
func skipNonPolicy(abspath string, info fs.FileInfo, depth int) bool {
	name := info.Name()
	if depth > 0 && strings.HasPrefix(name, ".") {
		return true
	}
	return !info.IsDir() && !isPolicyFile(name)
}

// setChecked tells the library the rules table was checked whole as the
// policy loaded (data.toolgate.rules_checked; tableChecked).
func (b *bundle) setChecked() {
	tg, ok := b.data["toolgate"].(map[string]any)
	if !ok {
		if _, exists := b.data["toolgate"]; exists {
			return // not an object: no table is served there either
		}
		tg = map[string]any{}
		b.data["toolgate"] = tg
	}
	tg["rules_checked"] = true
}

// setRules places the rules table at data.toolgate.rules, and its index at
// data.toolgate.rules_index.
func (b *bundle) setRules(rules []Rule) error {
	tg, ok := b.data["toolgate"].(map[string]any)
	if !ok {
		if _, exists := b.data["toolgate"]; exists {
			return errors.New("data.toolgate is not an object, so the rules table cannot be served at data.toolgate.rules")
		}
		tg = map[string]any{}
		b.data["toolgate"] = tg
	}
	if _, exists := tg["rules"]; exists {
		return errors.New("data.toolgate.rules is defined both by a data file and by policy.rules_file; keep one")
	}
	tg["rules"], tg["rules_index"] = rulesData(rules)
	return nil
}
