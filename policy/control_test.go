package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

func TestCheckControl(t *testing.T) {
	cases := []struct {
		name string
		args map[string]any
		want string // "": accepted
	}{
		{"plain", map[string]any{"path": "a/b", "content": "line 1\nline 2\ttab"}, ""},
		{"nil", nil, ""},
		{"DEL and non-ASCII", map[string]any{"path": "a\x7fé", "ké\x7f": 1}, ""},
		{"NUL in the target", map[string]any{"path": "notes.txt\x00.png"}, `target "notes.txt\x00.png" holds the control character U+0000`},
		{"newline in the target", map[string]any{"file": "a\nb"}, "U+000A"},
		{"target named in another case", map[string]any{"Path": "a\x1fb"}, "U+001F"},
		{"a later target argument", map[string]any{"path": "a", "url": "http://x/\r"}, "U+000D"},
		{"NUL in a key", map[string]any{"pa\x00th": "x"}, `argument key "pa\x00th"`},
		{"tab in a nested key", map[string]any{"opts": map[string]any{"a": []any{map[string]any{"k\t": 1}}}}, `argument key "k\t"`},
		{"ESC in a non-target value", map[string]any{"content": "\x1b[31m"}, ""},
	}
	for _, tc := range cases {
		err := policy.CheckControl(tc.args, policy.DefaultTargetArgs)
		var ce *policy.ControlError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ce)):
			t.Errorf("%s: err = %v, want a *ControlError containing %q", tc.name, err, tc.want)
		}
	}
	// Of several, the first in byte order, whatever the map order.
	args := map[string]any{"b\x01": 1, "a\x02": 2, "c\x03": 3}
	for range 20 {
		if err := policy.CheckControl(args, nil); err == nil || !strings.Contains(err.Error(), `"a\x02"`) {
			t.Fatalf("err = %v, want the key a\\x02", err)
		}
	}
}
