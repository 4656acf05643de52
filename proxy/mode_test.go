package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/pending"
)

// TestScopedModes checks where a call's mode comes from: the mode header
// from a trusted subject, else the subject's mode, else the upstream's,
// else the global one; the header from anybody else is ignored, and never
// reaches the upstream.
func TestScopedModes(t *testing.T) {
	env := newTestServer(t, seedEngine(t), func(c *Config) {
		auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{
			{Key: "agent-key", Subject: "agent-42"},
			{Key: "ci-key", Subject: "agent-ci"},
			{Key: "ide-key", Subject: "agent-ide"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = auth
		c.Upstreams[0].Mode = "bypass"
		c.SubjectModes = map[string]string{"agent-ci": "dont_ask"}
		c.ModeHeader, c.ModeHeaderSubjects = "X-Toolgate-Mode", []string{"agent-ide"}
		c.Pending, c.Hold = pending.NewMemory(pending.Options{}), 10*time.Millisecond
	})
	cases := []struct {
		name, key, mode, tool string
		want                  int
		decision              string
	}{
		{"upstream bypass turns an ask into allow", "agent-key", "", "Write", 200, "allow"},
		{"upstream mode never overrides a deny", "agent-key", "", "Delete", 403, "deny"},
		{"subject dont_ask before the upstream's bypass", "ci-key", "", "Write", 403, "deny"},
		{"untrusted header ignored", "ci-key", "bypass", "Write", 403, "deny"},
		{"untrusted header ignored (upstream mode applies)", "agent-key", "dont_ask", "Write", 200, "allow"},
		{"trusted header plan denies a write", "ide-key", "plan", "Write", 403, "deny"},
		{"trusted header default keeps the ask", "ide-key", "default", "Write", 202, "ask"},
		{"trusted header bad value", "ide-key", "yolo", "Write", 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(env.upstream.Requests())
			hdr := []string{"Authorization", "Bearer " + tc.key}
			if tc.mode != "" {
				hdr = append(hdr, "X-Toolgate-Mode", tc.mode)
			}
			res := post(t, env.url+"/tools/"+tc.tool, `{"path":"a.txt"}`, hdr...)
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			if got := res.Header.Get("X-Toolgate-Decision"); tc.decision != "" && got != tc.decision {
				t.Errorf("X-Toolgate-Decision %q, want %q", got, tc.decision)
			}
			reqs := env.upstream.Requests()
			if forwarded := len(reqs) > before; forwarded != (tc.want == 200) {
				t.Fatalf("forwarded %v with status %d", forwarded, tc.want)
			}
			if len(reqs) > before && reqs[len(reqs)-1].Header.Get("X-Toolgate-Mode") != "" {
				t.Error("the mode header reached the upstream")
			}
		})
	}
}

// TestDryRun checks that a dry-run upstream forwards every call, with the
// decision it would have had in X-Toolgate-Decision, and parks nothing.
func TestDryRun(t *testing.T) {
	env := newTestServer(t, seedEngine(t), func(c *Config) { c.Upstreams[0].DryRun = true })
	for tool, want := range map[string]string{"Read": "dry-run:allow", "Write": "dry-run:ask", "Delete": "dry-run:deny"} {
		res := post(t, env.url+"/tools/"+tool, `{"path":"secrets.txt"}`, "Authorization", "Bearer agent-key")
		if tool == "Read" {
			want = "dry-run:deny" // r2 denies Read of secrets.txt
		}
		if res.StatusCode != http.StatusOK || res.Header.Get("X-Toolgate-Decision") != want {
			t.Errorf("%s: %d %q, want 200 %q", tool, res.StatusCode, res.Header.Get("X-Toolgate-Decision"), want)
		}
	}
	reqs := env.upstream.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the upstream got %d calls, want all 3", len(reqs))
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r.Path, "/tools/") {
			t.Errorf("forwarded %s", r.Path)
		}
	}
}
