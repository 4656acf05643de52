package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
)

// pathKeys are the keys that name files or directories. When they come from
// the file and are relative, they are relative to the file's directory.
var pathKeys = map[string]bool{
	"policy.dir":             true,
	"policy.rules_file":      true,
	"identity.jwt.jwks_file": true,
}

// readFile reads and parses the YAML file at path into a map.
func readFile(path string) (map[string]any, error) {
	b, err := file.Provider(path).ReadBytes()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	m, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("config: parsing %s: %w", path, err)
	}
	if m == nil {
		m = map[string]any{} // an empty file
	}
	return m, nil
}

// fileWalker checks a parsed file against the schema and rewrites it in
// place: unknown keys and wrong types become errors, null values are dropped
// (so "jwt:" with nothing below it means no jwt), ${} references are
// expanded value by value, and relative paths are resolved against dir.
type fileWalker struct {
	lookup func(string) (string, bool)
	dir    string          // the file's directory, absolute
	refs   map[string]bool // every variable named by a ${} reference
	errs   []error
	// standIn: an unset variable in a secret's value takes a stand-in
	// (Source.StandInSecrets).
	standIn bool
}

func (w *fileWalker) fail(key, msg, fix string) {
	w.errs = append(w.errs, &FieldError{Key: key, Msg: msg, Fix: fix})
}

// mapping walks m, the value of mapping n at key path at ("" for the root).
func (w *fileWalker) mapping(n *node, m map[string]any, at string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		v, p := m[key], joinKey(at, key)
		f := n.child(key)
		switch {
		case f == nil:
			w.fail(p, "unknown key", suggestKey(n, at, key))
			delete(m, key)
		case v == nil:
			delete(m, key)
		case f.list:
			m[key] = w.list(f, v, p)
		case f.leaf == notLeaf:
			sub, ok := asMapping(v)
			if !ok {
				w.fail(p, "expected a mapping, got "+describe(v), fixFor(f))
				continue
			}
			m[key] = sub
			w.mapping(f, sub, p)
		default:
			nv, err := w.leaf(f, v, p)
			if err != nil {
				w.errs = append(w.errs, err)
				continue
			}
			m[key] = nv
		}
	}
}

// list walks v, the value of list n at key path at.
func (w *fileWalker) list(n *node, v any, at string) any {
	l, ok := v.([]any)
	if !ok {
		w.fail(at, "expected a list, got "+describe(v), fixFor(n))
		return v
	}
	for i, e := range l {
		p := at + "[" + strconv.Itoa(i) + "]"
		sub, ok := asMapping(e)
		if !ok {
			w.fail(p, "expected a mapping, got "+describe(e), fixFor(n))
			continue
		}
		l[i] = sub
		w.mapping(n, sub, p)
	}
	return l
}

// leaf expands, checks and converts the value v of leaf n at key path at.
func (w *fileWalker) leaf(n *node, v any, at string) (any, error) {
	if l, ok := v.([]any); ok && n.leaf == leafStrings {
		out := make([]string, len(l))
		for i, e := range l {
			p := at + "[" + strconv.Itoa(i) + "]"
			s, ok := e.(string)
			if !ok {
				return nil, &FieldError{Key: p, Msg: "expected a string, got " + describe(e), Fix: fixFor(n)}
			}
			x, _, err := w.expand(s, p)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	if m, ok := asMapping(v); ok && n.leaf == leafMap {
		out := make(map[string]any, len(m))
		for k, e := range m {
			p := at + "." + k
			s, ok := e.(string)
			if !ok {
				return nil, &FieldError{Key: p, Msg: "expected a string, got " + describe(e), Fix: fixFor(n)}
			}
			x, _, err := w.expand(s, p)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	}
	s, ok := v.(string)
	if !ok {
		nv, err := checkLeaf(n, v)
		if err != nil {
			return nil, &FieldError{Key: at, Msg: err.Error(), Fix: fixFor(n)}
		}
		return nv, nil
	}
	x, referenced, err := w.expand(s, at)
	if fe, ok := errors.AsType[*FieldError](err); ok && fe.unset != "" && w.standIn && (n.leaf == leafSecret || credentialURLs[n.path]) {
		x, referenced, err = standInSecret(n.path, fe.unset), true, nil
	}
	if err != nil {
		return nil, err
	}
	var nv any
	switch {
	case n.leaf == leafString || n.leaf == leafSecret:
		nv = x
	case referenced || n.leaf == leafDuration || n.leaf == leafByteSize:
		// true/false, whole numbers and lists arrive as text only through
		// ${}; a quoted "true" or "100" in the file is a string, refused
		// below like any mismatch.
		nv, err = leafFromString(n, x)
	default:
		nv, err = checkLeaf(n, x)
	}
	if err != nil {
		return nil, &FieldError{Key: at, Msg: err.Error(), Fix: fixFor(n)}
	}
	if p, ok := nv.(string); ok && pathKeys[n.path] && p != "" && !filepath.IsAbs(p) {
		nv = filepath.Join(w.dir, p)
	}
	return nv, nil
}

// credentialURLs are the URL keys that are credentials though not typed as
// secrets: a Slack or Teams webhook's URL is its key (the Helm chart
// writes it as ${NAME} from its Secret). They take stand-ins too.
var credentialURLs = map[string]bool{"approvals.notify[].url": true}

// standInSecret is the value a secret at key path takes when its variable
// (name) is unset and the configuration is read with stand-ins: valid for
// the key, distinct per variable (two keys may not share a value), and
// plainly not a secret anybody holds.
func standInSecret(path, name string) string {
	switch {
	case path == "pending.redis_url":
		return "redis://stand-in.invalid:6379"
	case credentialURLs[path]:
		return "https://stand-in.invalid/" + name
	}
	s := "stand-in-for-" + path + "-" + name + "-"
	for len(s) < 64 {
		s += "x"
	}
	return s
}

// expand expands s, the value at key path at, reporting whether it held a
// ${} reference.
func (w *fileWalker) expand(s, at string) (string, bool, error) {
	referenced := false
	x, err := expand(s, w.lookup, func(name string) {
		referenced = true
		w.refs[name] = true
	})
	if err != nil {
		fix := `write ${NAME} or ${NAME:-fallback}, and "$${" for a literal "${"`
		fe := &FieldError{Key: at, Msg: err.Error(), Fix: fix}
		if u, ok := errors.AsType[errUnset](err); ok {
			fe.Fix = fmt.Sprintf("set %s, or write ${%s:-fallback} in the file", u.name, u.name)
			fe.unset = u.name
		}
		return "", false, fe
	}
	return x, referenced, nil
}

// asMapping returns v as a map with string keys. YAML maps whose keys are
// not all strings arrive as map[any]any.
func asMapping(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[fmt.Sprint(k)] = e
		}
		return out, true
	}
	return nil, false
}
