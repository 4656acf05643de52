package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	env := map[string]string{
		"SET":    "value",
		"EMPTY":  "",
		"TRICKY": "a: b\nc: ${SET}",
	}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	tests := []struct {
		name     string
		in       string
		want     string
		wantRefs []string
		wantErr  string
	}{
		{name: "no reference", in: "plain", want: "plain"},
		{name: "whole value", in: "${SET}", want: "value", wantRefs: []string{"SET"}},
		{name: "inside text", in: "x-${SET}-y", want: "x-value-y", wantRefs: []string{"SET"}},
		{name: "two references", in: "${SET}${SET}", want: "valuevalue", wantRefs: []string{"SET", "SET"}},
		{name: "set but empty", in: "[${EMPTY}]", want: "[]", wantRefs: []string{"EMPTY"}},
		{name: "fallback when unset", in: "${NOPE:-dflt}", want: "dflt", wantRefs: []string{"NOPE"}},
		{name: "fallback when empty", in: "${EMPTY:-dflt}", want: "dflt", wantRefs: []string{"EMPTY"}},
		{name: "value beats fallback", in: "${SET:-dflt}", want: "value", wantRefs: []string{"SET"}},
		{name: "empty fallback", in: "${NOPE:-}", want: "", wantRefs: []string{"NOPE"}},
		{name: "fallback with colons", in: "${NOPE:-redis://h:6379/0}", want: "redis://h:6379/0", wantRefs: []string{"NOPE"}},
		{name: "escape", in: "$${SET}", want: "${SET}"},
		{name: "lone dollars stay", in: "pa$$w$rd$", want: "pa$$w$rd$"},
		{name: "value is not expanded again", in: "${TRICKY}", want: "a: b\nc: ${SET}", wantRefs: []string{"TRICKY"}},
		{name: "unset", in: "${NOPE}", wantErr: "environment variable NOPE is not set", wantRefs: []string{"NOPE"}},
		{name: "unterminated", in: "abc${SET", wantErr: `"${" at byte 3 has no closing "}"`},
		{name: "empty name", in: "${}", wantErr: `"${" at byte 0 is not followed by a variable name (letters, digits and _) and "}" or ":-fallback}"`},
		{name: "bad name", in: "${A B}", wantErr: `"${" at byte 0 is not followed by a variable name (letters, digits and _) and "}" or ":-fallback}"`},
		{name: "name starts with a digit", in: "${1A}", wantErr: `"${" at byte 0 is not followed by a variable name (letters, digits and _) and "}" or ":-fallback}"`},
		{name: "unset-only form is not supported", in: "${SET-x}", wantErr: `"${" at byte 0 is not followed by a variable name (letters, digits and _) and "}" or ":-fallback}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var refs []string
			got, err := expand(tt.in, lookup, func(n string) { refs = append(refs, n) })
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("expand(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("expand(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if diff := cmp.Diff(tt.wantRefs, refs); diff != "" {
				t.Errorf("expand(%q) refs (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestEnvironMap(t *testing.T) {
	got := environMap([]string{"A=1", "B=x=y", "A=2", "NOEQUALS", "=bad", "E="})
	want := map[string]string{"A": "1", "B": "x=y", "E": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environMap (-want +got):\n%s", diff)
	}
}
