package strictjson

import (
	"maps"
	"reflect"
	"testing"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		path []string
		want string // "" when there is no such member
	}{
		{`{"a":1,"task":{"ttl":60000},"b":2}`, []string{"task"}, `{"a":1,"b":2}`},
		{`{"task":{"ttl":60000},"b":2}`, []string{"task"}, `{"b":2}`},
		{`{"a":1,"task":{"ttl":60000}}`, []string{"task"}, `{"a":1}`},
		{`{"task":{}}`, []string{"task"}, `{}`},
		{"{ \"a\" : 1 ,\n \"task\" : [1, \"}\"] ,\t\"b\":2 }", []string{"task"}, "{ \"a\" : 1 ,\t\"b\":2 }"},
		{"{ \"task\" : null , \"b\" : 2 }", []string{"task"}, `{ "b" : 2 }`},
		{`{"\u0074ask":true,"b":"x\"task\":1"}`, []string{"task"}, `{"b":"x\"task\":1"}`},
		{`{"name":"w","params":{"task":{"ttl":1},"x":{"task":2}}}`, []string{"params", "task"}, `{"name":"w","params":{"x":{"task":2}}}`},
		{`{"params":{"_meta":{"c":{"extensions":{"io.x/tasks":{},"io.x/y":{}}}}}}`, []string{"params", "_meta", "c", "extensions", "io.x/tasks"}, `{"params":{"_meta":{"c":{"extensions":{"io.x/y":{}}}}}}`},
		{`{"a":-1.5e3,"b":true,"c":"\\","task":false}`, []string{"task"}, `{"a":-1.5e3,"b":true,"c":"\\"}`},
		// No such member, or not an object on the way.
		{`{"a":{"task":1}}`, []string{"task"}, ""},
		{`{"params":[{"task":1}]}`, []string{"params", "task"}, ""},
		{`{"params":"task"}`, []string{"params", "task"}, ""},
		{`{}`, []string{"task"}, ""},
		{`[{"task":1}]`, []string{"task"}, ""},
		{`{"task":1}`, nil, ""},
	} {
		got, ok := Cut([]byte(tc.in), tc.path...)
		if ok != (tc.want != "") || (ok && string(got) != tc.want) || (!ok && string(got) != tc.in) {
			t.Errorf("Cut(%s, %q) = %s, %v; want %q", tc.in, tc.path, got, ok, tc.want)
		}
		if ok {
			if _, err := Decode(got); err != nil {
				t.Errorf("Cut(%s, %q) = %s: %v", tc.in, tc.path, got, err)
			}
		}
	}
}

// FuzzCut holds Cut to what decoding says: for any object Decode accepts,
// cutting one of its members, or a member of one of its members, leaves a
// text Decode accepts, which decodes to the object without that member;
// cutting a key it does not have changes nothing.
func FuzzCut(f *testing.F) {
	for _, tc := range acceptCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"p":"a"},"task":{"ttl":60000}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := DecodeObject(data)
		if err != nil {
			return
		}
		if got, ok := Cut(data, "\x00absent"); ok || string(got) != string(data) {
			t.Fatalf("Cut of an absent key: %s, %v", got, ok)
		}
		for k, v := range obj {
			want := maps.Clone(obj)
			delete(want, k)
			cutAndCompare(t, data, want, k)
			inner, isObj := v.(map[string]any)
			for ik := range inner {
				wantInner := maps.Clone(inner)
				delete(wantInner, ik)
				want := maps.Clone(obj)
				want[k] = wantInner
				cutAndCompare(t, data, want, k, ik)
			}
			if !isObj {
				if got, ok := Cut(data, k, "x"); ok || string(got) != string(data) {
					t.Fatalf("Cut into a %T: %s, %v", v, got, ok)
				}
			}
		}
	})
}

func cutAndCompare(t *testing.T, data []byte, want map[string]any, path ...string) {
	t.Helper()
	got, ok := Cut(data, path...)
	if !ok {
		t.Fatalf("Cut(%s, %q) found nothing", data, path)
	}
	v, err := Decode(got)
	if err != nil {
		t.Fatalf("Cut(%s, %q) = %s: %v", data, path, got, err)
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("Cut(%s, %q) = %s, reads %v; want %v", data, path, got, v, want)
	}
	if len(got) >= len(data) {
		t.Fatalf("Cut(%s, %q) = %s, no shorter", data, path, got)
	}
}
