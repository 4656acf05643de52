package policy_test

import (
	"testing"

	"github.com/toolgate/toolgate/policy"
)

func TestNormalizeTarget(t *testing.T) {
	cases := []struct {
		arg, raw, want string
		escapes        bool
	}{
		{"path", "notes/today.txt", "notes/today.txt", false},
		{"path", "./notes//today.txt", "notes/today.txt", false},
		{"path", `notes\today.txt`, "notes/today.txt", false},
		{"path", "notes/../.env", ".env", false},
		{"path", "../etc/passwd", "../etc/passwd", true},
		{"path", "notes/../../x", "../x", true},
		{"path", "..", "..", true},
		{"path", "/etc/../etc/passwd", "/etc/passwd", false},
		{"path", "/../etc", "/etc", false},
		{"path", "..foo", "..foo", false},
		{"path", "", "", false},
		{"url", "HTTPS://Example.COM/a/../b", "https://example.com/b", false},
		{"uri", "https://example.com", "https://example.com", false},
		{"path", "file:///etc/../passwd", "file:///passwd", false},
		{"command", "rm -rf /", "rm -rf /", false},
	}
	for _, tc := range cases {
		got, esc := policy.NormalizeTarget(tc.arg, tc.raw)
		if got != tc.want || esc != tc.escapes {
			t.Errorf("NormalizeTarget(%q, %q) = %q, %v; want %q, %v", tc.arg, tc.raw, got, esc, tc.want, tc.escapes)
		}
	}
}

func TestNewToolTarget(t *testing.T) {
	cases := []struct {
		name    string
		args    map[string]any
		has     bool
		target  string
		targetR string
	}{
		{"first listed wins", map[string]any{"url": "http://x", "path": "a/b"}, true, "a/b", "a/b"},
		{"non-string skipped", map[string]any{"path": 3, "file": "./f"}, true, "f", "./f"},
		{"no target", map[string]any{"content": "x"}, false, "", ""},
		{"nil args", nil, false, "", ""},
	}
	for _, tc := range cases {
		tool := policy.NewTool("t", tc.args, policy.DefaultTargetArgs)
		if tool.HasTarget != tc.has || tool.Target != tc.target || tool.TargetRaw != tc.targetR {
			t.Errorf("%s: got %v %q %q, want %v %q %q", tc.name, tool.HasTarget, tool.Target, tool.TargetRaw, tc.has, tc.target, tc.targetR)
		}
	}
}
