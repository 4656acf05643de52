package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/callinfo"
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

// TestGrantsSeveralTargets: a call on a target and another is allowed by
// a grant for any target of the tool even when a grant for its first
// target exists too (which cannot cover it), and asks when only that one
// exists; a call on the target alone still uses the exact grant.
func TestGrantsSeveralTargets(t *testing.T) {
	store := pending.NewMemory(pending.Options{})
	logged := &decisionRecords{}
	env := newTestServer(t, seedEngineRules(t, `rules:
  - {id: r3, effect: ask, tool: Write, target: "*"}
`), func(c *Config) {
		c.Pending, c.Grants, c.Hold, c.DecisionLog = store, store, 10*time.Millisecond, logged
	})
	grant := func(target string, any bool) pending.Grant {
		g, err := store.Grant(context.Background(), pending.Grant{
			Subject: "key:agent-42", Upstream: "files", Tool: "Write", Target: target, AnyTarget: any, Approver: "alice", CallID: "C1",
		}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	call := func(name, body string, want int, wantRule string) {
		t.Helper()
		before := len(env.upstream.Requests())
		res := post(t, env.url+"/tools/Write", body, "Authorization", "Bearer agent-key")
		if res.StatusCode != want {
			t.Errorf("%s: %d, want %d", name, res.StatusCode, want)
		}
		if forwarded := len(env.upstream.Requests()) > before; forwarded != (want == 200) {
			t.Errorf("%s: forwarded %v, want %v", name, forwarded, want == 200)
		}
		if got := logged.lastRule(); wantRule != "" && got != wantRule {
			t.Errorf("%s: decided by %q, want %q", name, got, wantRule)
		}
	}
	const both = `{"path":"a.txt","file":"b.txt"}`
	exact := grant("a.txt", false)
	call("the exact grant alone, two targets", both, 202, "")
	anyTarget := grant("", true)
	// (Not both itself: that call is parked still, and a retry of it
	// attaches to it, TestGrantRetryAttaches.)
	call("both grants, two targets", `{"path":"a.txt","file":"b.txt","seq":3}`, 200, "grant:"+anyTarget.ID)
	call("both grants, two targets, the other first", `{"path":"b.txt","file":"a.txt"}`, 200, "grant:"+anyTarget.ID)
	call("both grants, the exact target alone", `{"path":"a.txt","seq":1}`, 200, "grant:"+exact.ID)
	call("both grants, another target alone", `{"path":"c.txt"}`, 200, "grant:"+anyTarget.ID)
	if _, err := store.Revoke(context.Background(), anyTarget.ID); err != nil {
		t.Fatal(err)
	}
	call("the any-target grant revoked, two targets", `{"path":"a.txt","file":"b.txt","seq":2}`, 202, "")
}

// decisionRecords keeps the decision log's records.
type decisionRecords struct {
	mu   sync.Mutex
	recs []DecisionRecord
}

func (d *decisionRecords) LogDecision(_ context.Context, r DecisionRecord) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recs = append(d.recs, r)
}

// lastRule is the first reason's ID of the last record, "" if none.
func (d *decisionRecords) lastRule() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.recs) == 0 || len(d.recs[len(d.recs)-1].Decision.Reasons) == 0 {
		return ""
	}
	return d.recs[len(d.recs)-1].Decision.Reasons[0].ID
}

// TestGrantsBoundToOtherParams: a grant remembered from an MCP tools/call
// covers a later call of the tool on its target only when it carries the
// same other params (a progressToken aside) and headers (the usual ones
// aside): one with another _meta, an added or a missing param, or an
// added header asks, and the upstream never gets it. The park record's
// GrantExtras is what the grant stores (approvals copies it).
func TestGrantsBoundToOtherParams(t *testing.T) {
	env, store := newGrantsMCPEnv(t)
	// send makes a call of write_note on notes/a.txt with others beside
	// its arguments; it reports whether the upstream ran it, and the call
	// as parked when it did not.
	send := func(others string, header ...string) (ran bool, parked pending.Call) {
		t.Helper()
		before := env.up.invoked("write_note")
		res, msg, raw := postMCP(t, env, paramsCall("1", `{"path":"notes/a.txt","content":"c`+rand.Text()+`"}`, others),
			append([]string{"Authorization", "Bearer agent-key"}, header...)...)
		if res.StatusCode != 200 {
			t.Fatalf("status %d: %s", res.StatusCode, raw)
		}
		ran = env.up.invoked("write_note") > before
		if ran == (msg.Result["isError"] == true) {
			t.Fatalf("upstream ran %v, answer %s", ran, raw)
		}
		if !ran {
			var ok bool
			if parked, ok = env.nextParked(time.Second); !ok {
				t.Fatalf("neither forwarded nor parked: %s", raw)
			}
		}
		return ran, parked
	}
	meta := `,"_meta":{"progressToken":"p-1","acme/mode":"draft"}`
	ran, pc := send(meta, "X-Env", "staging", "Cookie", "sid=1")
	if ran {
		t.Fatal("the first call ran without a grant")
	}
	// The grant as an approval remembers it (approvals copies GrantExtras).
	info := callinfo.Decode(pc.Info)
	if info.GrantExtras == "" {
		t.Fatal("a call with other params and headers parked without GrantExtras")
	}
	rememberParked(t, store, pc)
	for _, tc := range []struct {
		name, others string
		header       []string
		want         bool
	}{
		{"the same params and headers", meta, []string{"X-Env", "staging", "Cookie", "sid=1"}, true},
		{
			"another progressToken, credential and usual headers",
			`,"_meta":{"acme/mode":"draft","progressToken":"p-2"}`,
			[]string{"X-Env", "staging", "Cookie", "sid=2", "User-Agent", "other/2", "Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			true,
		},
		{"another _meta", `,"_meta":{"progressToken":"p-1","acme/mode":"publish"}`, []string{"X-Env", "staging", "Cookie", "sid=1"}, false},
		{"a param more", meta + `,"requestState":"rs-1"`, []string{"X-Env", "staging", "Cookie", "sid=1"}, false},
		{"no _meta", "", []string{"X-Env", "staging", "Cookie", "sid=1"}, false},
		{"a header more", meta, []string{"X-Env", "staging", "Cookie", "sid=1", "X-Target-Override", "/etc/shadow"}, false},
		{"another header value", meta, []string{"X-Env", "prod", "Cookie", "sid=1"}, false},
		{"no credential", meta, []string{"X-Env", "staging"}, false},
	} {
		if got, _ := send(tc.others, tc.header...); got != tc.want {
			t.Errorf("%s: forwarded %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, r := range env.up.got() {
		if r.Header.Get("X-Target-Override") != "" || r.Header.Get("X-Env") == "prod" || bytes.Contains(r.Body, []byte("publish")) {
			t.Errorf("the upstream received a call no grant covered: %s %v", r.Body, r.Header)
		}
	}
}

// rememberParked remembers pc as an approval with "remember" does
// (approvals.grant copies the parked call's GrantExtras).
func rememberParked(t *testing.T, store pending.Grants, pc pending.Call) {
	t.Helper()
	info := callinfo.Decode(pc.Info)
	if _, err := store.Grant(t.Context(), pending.Grant{
		Subject: pc.Principal, Upstream: pc.Upstream, Tool: pc.Tool, Target: info.Target,
		Extras: info.GrantExtras, Approver: "alice", CallID: pc.ID,
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// newGrantsMCPEnv is an MCP upstream behind a toolgate that remembers
// grants in its memory store, and that store.
func newGrantsMCPEnv(t *testing.T) (*mcpEnv, pending.Grants) {
	t.Helper()
	env := newMCPEnv(t, mcpRawEra, func(c *Config) {
		auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{{Key: "agent-key", Subject: "agent-42"}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth, c.Grants, c.Hold = auth, c.Pending.(pending.Grants), 20*time.Millisecond
	})
	store := env.store.(pending.Grants)
	return env, store
}

// rememberedWrite parks one REST call of Write on a.txt (no query, no
// header beyond the usual), remembers it as an approval does
// (approvals.grant copies the parked call's GrantExtras), and returns a
// function that sends a later call with a query and header pairs and
// tells its status and what the upstream received of it.
func rememberedWrite(t *testing.T) func(query string, header ...string) (int, *testkit.Request) {
	t.Helper()
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, seedEngineRules(t, "rules:\n  - {id: r3, effect: ask, tool: Write, target: \"*\"}\n"), func(c *Config) {
		c.Pending, c.Grants, c.Hold = store, store, 10*time.Millisecond
		c.GrantKey = []byte("0123456789abcdef0123456789abcdef")
		c.Upstreams[0].ToolQuery = true
	})
	res := post(t, env.url+"/tools/Write", `{"path":"a.txt","content":"x"}`, "Authorization", "Bearer agent-key")
	if res.StatusCode != 202 {
		t.Fatalf("first call: %d, want 202 (parked)", res.StatusCode)
	}
	pc, err := store.Get(context.Background(), res.Header.Get("X-Toolgate-Call-Id"))
	if err != nil {
		t.Fatal(err)
	}
	rememberParked(t, store, pc)
	return func(query string, header ...string) (int, *testkit.Request) {
		t.Helper()
		before := len(env.upstream.Requests())
		u := env.url + "/tools/Write"
		if query != "" {
			u += "?" + query
		}
		res := post(t, u, `{"path":"a.txt","content":"y"}`, append([]string{"Authorization", "Bearer agent-key"}, header...)...)
		if reqs := env.upstream.Requests(); len(reqs) > before {
			return res.StatusCode, &reqs[len(reqs)-1]
		}
		return res.StatusCode, nil
	}
}

// TestGrantBoundToQuery: with tool_query, a grant remembered from a call
// without a query string does not cover a later call with one: the query
// is sent beside the arguments and shown in the request line the approver
// saw. Without one, the grant covers the call as before.
func TestGrantBoundToQuery(t *testing.T) {
	send := rememberedWrite(t)
	if st, _ := send(""); st != 200 {
		t.Fatalf("the same call: %d, want 200 (the grant covers it)", st)
	}
	if st, got := send("force=true&dry_run=false"); st == 200 || got != nil {
		t.Errorf("a call adding a query its approval never showed: %d, forwarded %v; want it asked (202)", st, got)
	}
}

// TestGrantSendsNoPrefer: a call a grant lets through is sent as its
// approval showed it, without Prefer: the parked request has none
// (toolgate's own wait and respond-async), so a Prefer an upstream acts on
// (tx=commit) was neither shown nor bound.
func TestGrantSendsNoPrefer(t *testing.T) {
	send := rememberedWrite(t)
	st, got := send("", "Prefer", "resolution=merge-duplicates, tx=commit")
	if st != 200 || got == nil {
		t.Fatalf("the granted call: %d, forwarded %v; want 200", st, got)
	}
	if p := got.Header.Values("Prefer"); len(p) > 0 {
		t.Errorf("the granted call was sent Prefer %q, which its approval did not show", p)
	}
}

// TestGrantKeyDerived: grants' digests are keyed with a key derived from
// the approvals secret, never the secret itself (which signs the links),
// and no secret gives no key.
func TestGrantKeyDerived(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	k := GrantKey(secret)
	if len(k) != 32 || bytes.Equal(k, secret) || bytes.Equal(k, SealKey(secret)) {
		t.Errorf("GrantKey = %x: want 32 bytes of its own", k)
	}
	if !bytes.Equal(k, GrantKey(secret)) {
		t.Error("GrantKey is not the same for the same secret: replicas would not honour each other's grants")
	}
	if GrantKey(nil) != nil {
		t.Error("GrantKey of no secret is a key")
	}
}

// stalledGrants answers no grant lookup: as a Redis that takes commands
// and never replies.
type stalledGrants struct{ *pending.MemoryStore }

func (stalledGrants) FindGrant(ctx context.Context, _ pending.GrantQuery) (pending.Grant, error) {
	<-ctx.Done()
	return pending.Grant{}, ctx.Err()
}

// TestStalledGrantLookupRefusesTheAsk: a store that does not answer the
// grant lookup would not park the call either; the ask is refused (503,
// nothing parked or forwarded) once the lookup's second is up, not after
// the park's own time bound as well.
func TestStalledGrantLookupRefusesTheAsk(t *testing.T) {
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, seedEngineRules(t, "rules:\n  - {id: r3, effect: ask, tool: Write, target: \"*\"}\n"), func(c *Config) {
		c.Pending, c.Grants, c.Hold = store, stalledGrants{store}, 10*time.Millisecond
	})
	start := time.Now()
	res := post(t, env.url+"/tools/Write", `{"path":"a.txt","content":"x"}`, "Authorization", "Bearer agent-key")
	took := time.Since(start)
	if res.StatusCode != http.StatusServiceUnavailable || took > 2*time.Second {
		t.Fatalf("ask with the store stalled: %d after %v, want 503 within the lookup's 1 s", res.StatusCode, took)
	}
	if waiting, _ := store.Count(context.Background(), pending.Waiting); waiting != 0 || len(env.upstream.Requests()) != 0 {
		t.Fatalf("%d calls parked, %d forwarded; want none", waiting, len(env.upstream.Requests()))
	}
}

// TestGrantNeverAnswersMustAsk: a grant for a tool on any target, such as
// approving an ordinary ask of it may leave, answers that tool's ordinary
// asks but not one whose rule says must_ask: nothing automatic answers
// such an ask, a grant no more than bypass mode.
func TestGrantNeverAnswersMustAsk(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC))
	store := pending.NewMemory(pending.Options{Now: clock.Now})
	env := newGrantEnv(t, store, `rules:
  - {id: notes, effect: ask, tool: Write, target: "notes/**"}
  - {id: secrets, effect: ask, tool: Write, target: "secrets/**", must_ask: true}
`)
	if _, err := store.Grant(context.Background(), pending.Grant{
		Subject: "key:agent-42", Upstream: "files", Tool: "Write", AnyTarget: true, Approver: "alice", CallID: "C1",
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		want   int
	}{
		{"notes/a.txt", http.StatusOK},       // the grant answers an ordinary ask
		{"secrets/key", http.StatusAccepted}, // and not a must_ask one: it parks
	} {
		res := post(t, env.url+"/tools/Write", `{"path":"`+c.target+`"}`, "Authorization", "Bearer agent-key")
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("Write %s: %d (%s), want %d", c.target, res.StatusCode, res.Header.Get("X-Toolgate-Decision"), c.want)
		}
	}
}

// newGrantEnv is a proxy deciding by the rules table rules, with store for
// its parked calls and grants, and agent-key for agent-42.
func newGrantEnv(t *testing.T, store *pending.MemoryStore, rules string) *testEnv {
	t.Helper()
	return newTestServer(t, seedEngineRules(t, rules), func(c *Config) {
		auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{{Key: "agent-key", Subject: "agent-42"}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth, c.Pending, c.Grants, c.Hold = auth, store, store, 10*time.Millisecond
	})
}
