package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// TestGrants checks that a remembered grant turns a later ask in its scope,
// and only there, into allow, and never a deny or an ask naming approvers.
func TestGrants(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC))
	store := pending.NewMemory(pending.Options{Now: clock.Now})
	env := newTestServer(t, seedEngineRules(t, `rules:
  - {id: r2, effect: deny, tool: Read, target: secrets.txt}
  - {id: r3, effect: ask, tool: Write, target: "*"}
  - {id: r5, effect: ask, tool: Deploy, target: "*", approvers: {groups: [sre]}}
  - {id: r6, effect: ask, tool: Read, target: "*"}
`), func(c *Config) {
		auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{
			{Key: "agent-key", Subject: "agent-42"}, {Key: "other-key", Subject: "agent-7"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth, c.Pending, c.Grants, c.Hold = auth, store, store, 10*time.Millisecond
	})
	grant := func(tool, target string, any bool, life time.Duration) pending.Grant {
		g, err := store.Grant(context.Background(), pending.Grant{
			Subject: "key:agent-42", Upstream: "files", Tool: tool, Target: target, AnyTarget: any, Approver: "alice", CallID: "C1",
		}, life)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	call := func(key, tool, path string) (int, string) {
		body := `{"path":"` + path + `"}`
		if strings.HasPrefix(path, "{") {
			body = path // the whole arguments object
		}
		res := post(t, env.url+"/tools/"+tool, body, "Authorization", "Bearer "+key)
		return res.StatusCode, res.Header.Get("X-Toolgate-Decision")
	}
	g := grant("Write", "a.txt", false, time.Hour)
	grant("Read", "", true, time.Hour)
	grant("Deploy", "", true, time.Hour)
	for _, tc := range []struct {
		name, key, tool, path string
		want                  int
	}{
		{"in scope", "agent-key", "Write", "a.txt", 200},
		{"another target", "agent-key", "Write", "b.txt", 202},
		{"another subject", "other-key", "Write", "a.txt", 202},
		{"another tool", "agent-key", "Edit", "a.txt", 403},
		{"tool scope, any target", "agent-key", "Read", "x/y.txt", 200},
		{"never past a deny", "agent-key", "Read", "secrets.txt", 403},
		{"never for an ask naming approvers", "agent-key", "Deploy", "prod", 202},
		// A grant for one target covers a call only when all its targets
		// are that one; a decoy target argument never borrows it.
		{"a second target", "agent-key", "Write", `{"path":"a.txt","file":"b.txt"}`, 202},
		{"a second target before it", "agent-key", "Write", `{"file":"a.txt","path":"b.txt"}`, 202},
		{"the same target twice", "agent-key", "Write", `{"path":"a.txt","file":"./a.txt"}`, 200},
		{"tool scope, a second target denied", "agent-key", "Read", `{"path":"x.txt","file":"secrets.txt"}`, 403},
	} {
		if got, _ := call(tc.key, tc.tool, tc.path); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if _, err := store.Revoke(context.Background(), g.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := call("agent-key", "Write", "a.txt"); got != 202 {
		t.Errorf("after revoking: %d, want 202", got)
	}
	clock.Advance(2 * time.Hour)
	if got, _ := call("agent-key", "Read", "x/y.txt"); got != 202 {
		t.Errorf("after the grant expired: %d, want 202", got)
	}
}
