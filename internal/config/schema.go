package config

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// The schema is the tree of keys a configuration may contain, read once from
// the koanf tags of Config. Unknown-key detection, type checking, the
// environment mapping and Redacted all walk it, so a field added to Config is
// known to all of them without further edits.

type leafKind uint8

const (
	notLeaf leafKind = iota
	leafString
	leafSecret
	leafBool     // bool or *bool
	leafDuration // Duration
	leafByteSize // ByteSize
	leafInt      // int
	leafStrings  // []string
	leafMap      // map[string]string
)

var (
	durationType = reflect.TypeFor[Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
	secretType   = reflect.TypeFor[Secret]()
)

// node is one key of the schema. A node is a leaf (a value), a mapping
// (fields), or a list of mappings (list is set and fields describe one
// element).
type node struct {
	key    string   // the YAML key
	path   string   // the key path; list elements are written "[]": "upstreams[].url"
	index  int      // the field's index in its struct
	leaf   leafKind // notLeaf for mappings and lists
	list   bool
	fields []*node
}

// child returns the field of n named key, or nil.
func (n *node) child(key string) *node {
	for _, f := range n.fields {
		if f.key == key {
			return f
		}
	}
	return nil
}

// keys returns the names of n's fields in declaration order.
func (n *node) keys() []string {
	ks := make([]string, len(n.fields))
	for i, f := range n.fields {
		ks[i] = f.key
	}
	return ks
}

// schema returns the root of the key tree (the Config mapping).
var schema = sync.OnceValue(func() *node {
	return &node{fields: structFields(reflect.TypeFor[Config](), "")}
})

// structFields describes the tagged fields of struct type t. It panics on a
// field type the loader cannot decode: that is a programming error in
// config.go, and every test run would show it.
func structFields(t reflect.Type, prefix string) []*node {
	var out []*node
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if key == "" || key == "-" {
			continue
		}
		n := &node{key: key, path: joinKey(prefix, key), index: i, leaf: leafOf(f.Type)}
		ft := f.Type
		switch {
		case n.leaf != notLeaf:
		case ft.Kind() == reflect.Struct:
			n.fields = structFields(ft, n.path)
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			n.fields = structFields(ft.Elem(), n.path)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			n.list = true
			n.fields = structFields(ft.Elem(), n.path+"[]")
		default:
			panic(fmt.Sprintf("config: field %s.%s has type %s, which the loader cannot decode", t.Name(), f.Name, ft))
		}
		out = append(out, n)
	}
	return out
}

func leafOf(t reflect.Type) leafKind {
	switch {
	case t == secretType:
		return leafSecret
	case t == durationType:
		return leafDuration
	case t == byteSizeType:
		return leafByteSize
	case t.Kind() == reflect.Int:
		return leafInt
	case t.Kind() == reflect.String:
		return leafString
	case t.Kind() == reflect.Bool, t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Bool:
		return leafBool
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return leafStrings
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		return leafMap
	}
	return notLeaf
}

// lookupPath finds the node of a dotted key path without list elements
// ("pending.redis_url"), or returns nil.
func lookupPath(path string) *node {
	n := schema()
	for key := range strings.SplitSeq(path, ".") {
		if n.list {
			return nil
		}
		if n = n.child(key); n == nil {
			return nil
		}
	}
	return n
}

// allPaths lists every key path of the schema, mappings and lists included,
// in declaration order.
func allPaths() []*node {
	var out []*node
	var walk func(*node)
	walk = func(n *node) {
		for _, f := range n.fields {
			out = append(out, f)
			walk(f)
		}
	}
	walk(schema())
	return out
}

// joinKey appends key to a key path.
func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// describe names the YAML type of a decoded value for an error message. It
// never includes the value itself, which may be a secret.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "nothing (null)"
	case string:
		return "a string"
	case bool:
		return "true/false"
	case []any, []string:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	}
	if _, ok := wholeNumber(v); ok {
		return "a number"
	}
	switch v.(type) {
	case float32, float64:
		return "a number"
	}
	return fmt.Sprintf("a value of type %T", v)
}
