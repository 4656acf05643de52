// Package kubestrict decodes Kubernetes manifests the way the API server
// reads them, for toolgate's manifest and chart tests: what the server
// would refuse or silently drop (an unknown field, a field name in another
// letter case, a duplicate key, a wrong value type) is an error.
package kubestrict

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// documentSeparator is a YAML document marker line: "---", optionally
// followed by a comment.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// SplitDocuments splits a multi-document YAML stream on its "---" lines and
// drops the documents that hold only comments and blank lines.
func SplitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range documentSeparator.Split(string(data), -1) {
		for line := range strings.SplitSeq(doc, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, []byte(doc))
				break
			}
		}
	}
	return docs
}

// DecodeStrict is sigs.k8s.io/yaml's UnmarshalStrict (unknown fields and
// duplicate keys are errors) plus a case-sensitive check of every field
// name, which encoding/json alone does not make: the API server does not
// read "RestartPolicy" as "restartPolicy".
func DecodeStrict(doc []byte, into any) error {
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	var generic any
	if err := json.Unmarshal(j, &generic); err != nil {
		return err
	}
	return exactFieldNames(generic, reflect.TypeOf(into), "")
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// exactFieldNames checks that every key of v, a decoded JSON value, is
// spelt exactly as a json tag of t (Go's decoder matches case-insensitively).
// Types with their own UnmarshalJSON (Quantity, IntOrString, Time) are
// leaves; wrong value types are left to the decoder, which has run first.
func exactFieldNames(v any, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%s: unknown field %q (field names are case-sensitive)", strings.TrimPrefix(at+"."+k, "."), k)
			}
			if err := exactFieldNames(obj[k], ft, at+"."+k); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		arr, _ := v.([]any)
		for i, e := range arr {
			if err := exactFieldNames(e, t.Elem(), at+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, _ := v.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if err := exactFieldNames(obj[k], t.Elem(), at+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps the JSON names of t's fields to their types, with the
// fields of embedded and ",inline" structs included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			maps.Copy(out, jsonFields(ft))
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// DecodeInto strictly decodes doc into a new T and files it by name in
// into. An object without a name, a name used twice and a namespace set in
// the manifest (it is given at install, with -n) are errors.
func DecodeInto[T any, P interface {
	*T
	GetName() string
	GetNamespace() string
}](doc []byte, into map[string]P) error {
	obj := P(new(T))
	if err := DecodeStrict(doc, obj); err != nil {
		return err
	}
	switch name := obj.GetName(); {
	case name == "":
		return errors.New("metadata.name is empty")
	case into[name] != nil:
		return fmt.Errorf("%q is defined twice", name)
	case obj.GetNamespace() != "":
		return fmt.Errorf("%q sets metadata.namespace; it is given at install, with -n", name)
	default:
		into[name] = obj
	}
	return nil
}
