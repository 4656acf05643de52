package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The environment mapping. A variable TOOLGATE_<KEY_PATH> overrides the key
// whose path, upper-cased with "_" between levels, is KEY_PATH. Keys contain
// "_" themselves (pending.redis_url), so names are matched against the names
// of the known keys rather than split on "_". An entry of a list of mappings
// is addressed by its index: TOOLGATE_UPSTREAMS_0_URL is upstreams[0].url,
// and the entry must exist in the file (the environment changes entries, it
// does not add them). Lists of strings are comma-separated; booleans,
// durations and sizes are written as in the file. An empty variable counts
// as unset.

const envPrefix = "TOOLGATE_"

// envIndex is the set of variable names that map to keys.
type envIndex struct {
	keys  map[string]*node // TOOLGATE_PENDING_REDIS_URL -> the pending.redis_url leaf
	other map[string]*node // names of mappings and lists, which cannot be set as a whole
	lists []envList
}

// envList describes the variables of the entries of one list of mappings.
type envList struct {
	prefix  string           // "TOOLGATE_UPSTREAMS_"
	list    *node            // upstreams
	fields  map[string]*node // "URL", "TARGET_ARGS" -> leaves of an entry
	example string           // the first field's name, for messages: "NAME"
}

var envNames = sync.OnceValue(func() *envIndex {
	ix := &envIndex{keys: map[string]*node{}, other: map[string]*node{}}
	var walk func(*node)
	walk = func(n *node) {
		for _, f := range n.fields {
			name := envName(f.path)
			if _, dup := ix.keys[name]; dup {
				panic("config: two keys map to the environment variable " + name)
			}
			switch {
			case f.list:
				ix.other[name] = f
				fields, example := entryFields(f)
				ix.lists = append(ix.lists, envList{prefix: name + "_", list: f, fields: fields, example: example})
			case f.leaf != notLeaf:
				ix.keys[name] = f
			default:
				ix.other[name] = f
				walk(f)
			}
		}
	}
	walk(schema())
	return ix
})

// entryFields maps the relative variable names of the leaves of one entry of
// list to the leaves, and returns the first name in declaration order. Lists
// nested inside entries are not reachable from the environment.
func entryFields(list *node) (map[string]*node, string) {
	out := map[string]*node{}
	first := ""
	var walk func(*node)
	walk = func(n *node) {
		for _, f := range n.fields {
			switch {
			case f.list:
			case f.leaf != notLeaf:
				rel := strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(f.path, list.path+"[]."), ".", "_"))
				out[rel] = f
				if first == "" {
					first = rel
				}
			default:
				walk(f)
			}
		}
	}
	walk(list)
	return out, first
}

// envName is the variable that overrides the key at path.
func envName(path string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// exemptEnv reports whether a TOOLGATE_* name that maps to no key is still
// not an error: the --config flag's variable, the test suite's own settings
// (TOOLGATE_TEST_REDIS_ADDR), and the variables Kubernetes injects for every
// Service whose name starts with "toolgate" (toolgate, toolgate-approvals,
// toolgate-redis, ...): <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT[_<port>],
// <NAME>_PORT and <NAME>_PORT_<n>_<PROTO>[_PROTO|_PORT|_ADDR]. No config key
// ends like those, nor starts with "test".
func exemptEnv(name string) bool {
	if name == "TOOLGATE_CONFIG" || strings.HasPrefix(name, "TOOLGATE_TEST_") {
		return true
	}
	return serviceLinkEnv.MatchString(name)
}

var serviceLinkEnv = regexp.MustCompile(`^TOOLGATE(_[A-Z0-9_]+?)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)

// listOverride is a variable that sets a key of one entry of a list.
type listOverride struct {
	env   string // TOOLGATE_UPSTREAMS_0_URL
	list  *node  // upstreams
	index int    // 0
	field *node  // upstreams[].url
	value any
}

// key is the concrete key path the override sets: "upstreams[0].url".
func (o listOverride) key() string {
	return o.list.path + "[" + strconv.Itoa(o.index) + "]." + strings.TrimPrefix(o.field.path, o.list.path+"[].")
}

// envOverrides reads the TOOLGATE_* entries of env. It returns the values of
// keys outside lists as a nested map, the overrides of list entries, and an
// error for each variable that matches no key or holds a value of the wrong
// type. skip says which unmatched names are not errors.
func envOverrides(env map[string]string, skip func(string) bool) (map[string]any, []listOverride, []error) {
	ix := envNames()
	tree := map[string]any{}
	var items []listOverride
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(env)) {
		val := env[name]
		if !strings.HasPrefix(name, envPrefix) || val == "" {
			continue
		}
		if n, ok := ix.keys[name]; ok {
			v, err := leafFromString(n, val)
			if err != nil {
				errs = append(errs, &FieldError{Key: n.path, Msg: "set by " + name + ": " + err.Error(), Fix: fixFor(n)})
				continue
			}
			setPath(tree, strings.Split(n.path, "."), v)
			continue
		}
		if item, err, ok := ix.matchList(name, val); ok {
			if err != nil {
				errs = append(errs, err)
			} else {
				items = append(items, item)
			}
			continue
		}
		if skip(name) {
			continue
		}
		errs = append(errs, ix.unknown(name))
	}
	return tree, items, errs
}

// matchList matches name against the entries of the lists. ok is false when
// name addresses no list entry key.
func (ix *envIndex) matchList(name, val string) (listOverride, error, bool) {
	for _, l := range ix.lists {
		rest, ok := strings.CutPrefix(name, l.prefix)
		if !ok {
			continue
		}
		idx, field, ok := strings.Cut(rest, "_")
		if !ok || !allDigits(idx) {
			continue
		}
		f := l.fields[field]
		if f == nil {
			continue
		}
		i, err := strconv.Atoi(idx)
		if err != nil {
			continue // too many digits to be an index
		}
		o := listOverride{env: name, list: l.list, index: i, field: f}
		v, err := leafFromString(f, val)
		if err != nil {
			return o, &FieldError{Key: o.key(), Msg: "set by " + name + ": " + err.Error(), Fix: fixFor(f)}, true
		}
		o.value = v
		return o, nil, true
	}
	return listOverride{}, nil, false
}

// unknown describes a TOOLGATE_* variable that maps to no key.
func (ix *envIndex) unknown(name string) error {
	e := &FieldError{Key: name, Msg: "environment variable matches no configuration key"}
	if n, ok := ix.other[name]; ok {
		if n.list {
			l := ix.list(n)
			e.Msg = "cannot set " + n.path + " as a whole: it is a list of mappings"
			e.Fix = "write the list in the file; override one entry's key with " + l.prefix + "<index>_<KEY>, e.g. " + l.prefix + "0_" + l.example
		} else {
			e.Msg = "cannot set " + n.path + " as a whole: it is a mapping"
			e.Fix = "set its keys one by one, e.g. " + envName(n.fields[0].path)
		}
		return e
	}
	for _, l := range ix.lists {
		rest, ok := strings.CutPrefix(name, l.prefix)
		if !ok {
			continue
		}
		if idx, field, ok := strings.Cut(rest, "_"); ok && allDigits(idx) {
			if best := closest(field, slices.Collect(maps.Keys(l.fields))); best != "" {
				e.Fix = "did you mean " + l.prefix + idx + "_" + best + "?"
				return e
			}
		}
		e.Fix = "an entry of " + l.list.path + " is set with " + l.prefix + "<index>_<KEY>, where KEY is one of " + strings.Join(slices.Sorted(maps.Keys(l.fields)), ", ")
		return e
	}
	if best := closest(name, slices.Collect(maps.Keys(ix.keys))); best != "" {
		e.Fix = "did you mean " + best + "?"
	} else {
		e.Fix = "remove it, or name a key: TOOLGATE_ + the key path in upper case with _ between levels, e.g. TOOLGATE_PENDING_REDIS_URL"
	}
	return e
}

// list returns the envList of list n.
func (ix *envIndex) list(n *node) envList {
	for _, l := range ix.lists {
		if l.list == n {
			return l
		}
	}
	panic("config: no environment names for list " + n.path)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// patchLists applies list entry overrides to the parsed file m. An override
// of an entry the file does not have is an error.
func patchLists(m map[string]any, items []listOverride) []error {
	var errs []error
	for _, o := range items {
		l, _ := getPath(m, strings.Split(o.list.path, ".")).([]any)
		if o.index >= len(l) {
			errs = append(errs, &FieldError{
				Key: o.key(),
				Msg: fmt.Sprintf("set by %s, but the file has no %s[%d] (it lists %d)", o.env, o.list.path, o.index, len(l)),
				Fix: "the environment can change the entries the file defines, not add new ones; add the entry to the file",
			})
			continue
		}
		entry, ok := l[o.index].(map[string]any)
		if !ok {
			continue // the file walk has reported the entry's type
		}
		rel := strings.TrimPrefix(o.field.path, o.list.path+"[].")
		setPath(entry, strings.Split(rel, "."), o.value)
	}
	return errs
}

// flagOverrides turns the flags the user set (key path -> value) into a
// nested map. A string value is read like an environment variable; other
// values must have the key's type (bool, time.Duration, []string...).
func flagOverrides(flags map[string]any) (map[string]any, []error) {
	tree := map[string]any{}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(flags)) {
		n := lookupPath(key)
		if n == nil || n.leaf == notLeaf {
			errs = append(errs, &FieldError{Key: key, Msg: "a flag sets this, but it is not a configuration key", Fix: "this is a bug in toolgate's flag table; please report it"})
			continue
		}
		var v any
		var err error
		if s, ok := flags[key].(string); ok {
			v, err = leafFromString(n, s)
		} else {
			v, err = checkLeaf(n, flags[key])
		}
		if err != nil {
			errs = append(errs, &FieldError{Key: key, Msg: "set by a flag: " + err.Error(), Fix: fixFor(n)})
			continue
		}
		setPath(tree, strings.Split(key, "."), v)
	}
	return tree, errs
}

// setPath sets m[keys[0]][keys[1]]... = v, creating mappings on the way.
func setPath(m map[string]any, keys []string, v any) {
	for _, k := range keys[:len(keys)-1] {
		sub, ok := m[k].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[k] = sub
		}
		m = sub
	}
	m[keys[len(keys)-1]] = v
}

// getPath returns m[keys[0]][keys[1]]..., or nil.
func getPath(m map[string]any, keys []string) any {
	var v any = m
	for _, k := range keys {
		sub, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = sub[k]
	}
	return v
}
