package proxy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// askAll is a Decider that asks for every call.
var askAll = deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
	return policy.Decision{Action: policy.Ask, Reasons: []policy.Reason{{ID: "r3", Message: "writes need a look"}}}, nil
})

type parkEnv struct {
	*testEnv
	store  pending.Store
	server *Server
	parked chan pending.Call
}

func newParkEnv(t *testing.T, mutate ...func(*Config)) *parkEnv {
	t.Helper()
	pe := &parkEnv{store: pending.NewMemory(pending.Options{}), parked: make(chan pending.Call, 16)}
	pe.testEnv = newTestServer(t, askAll, append([]func(*Config){func(c *Config) {
		c.Pending = pe.store
		c.Hold = 2 * time.Second
		c.TTL = time.Minute
		c.OnPark = func(pc pending.Call) { pe.parked <- pc }
		c.NewCallID = newIDs()
		c.Upstreams[0].Transport = nil
		c.Metrics = nil
		c.serverHook = func(s *Server) { pe.server = s }
	}}, mutate...)...)
	return pe
}

func newIDs() func() string {
	var n atomic.Int64
	return func() string { return "CALL" + string(rune('A'+n.Add(1)%26)) + time.Now().Format("150405.000000000") }
}

func (pe *parkEnv) nextParked(t *testing.T) pending.Call {
	t.Helper()
	select {
	case pc := <-pe.parked:
		return pc
	case <-time.After(2 * time.Second):
		t.Fatal("no call parked")
		return pending.Call{}
	}
}

// TestAskApprovedWhileHeld: the agent is held, an approver approves, the
// agent gets the upstream's own answer and the upstream sees one request.
func TestAskApprovedWhileHeld(t *testing.T) {
	pe := newParkEnv(t)
	go func() {
		pc := pe.nextParked(t)
		if _, err := pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice", Comment: "fine"}); err != nil {
			t.Error(err)
		}
	}()
	body := `{"path":"notes/a.txt","content":"reviewed"}`
	res := post(t, pe.url+"/tools/Write", body, "Authorization", "Bearer agent-key")
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(got), `"ok":true`) || res.Header.Get(headerDecision) != "approved" {
		t.Fatalf("status %d decision %q body %s", res.StatusCode, res.Header.Get(headerDecision), got)
	}
	reqs := pe.upstream.Requests()
	if len(reqs) != 1 || string(reqs[0].Body) != body || reqs[0].Header.Get("Authorization") != "" || reqs[0].Header.Get(headerCallID) == "" {
		t.Fatalf("upstream got %+v", reqs)
	}
}

func TestAskRejectedWhileHeld(t *testing.T) {
	pe := newParkEnv(t)
	go func() {
		pc := pe.nextParked(t)
		_, _ = pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Rejected, By: "alice", Comment: "not today"})
	}()
	res := post(t, pe.url+"/tools/Write", `{"path":"x"}`)
	p := readProblem(t, res)
	if res.StatusCode != 403 || p.Decision != "rejected" || !strings.Contains(p.Detail, "not today") || len(pe.upstream.Requests()) != 0 {
		t.Fatalf("status %d problem %+v upstream %d", res.StatusCode, p, len(pe.upstream.Requests()))
	}
}

// TestAskAfterHold is the 202 path: the hold runs out, the approval comes
// later, the sweeper executes once, the status URL returns the result, and
// an identical retry attaches without a second execution.
func TestAskAfterHold(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold = 100 * time.Millisecond })
	body := `{"path":"notes/a.txt","content":"x"}`
	res := post(t, pe.url+"/tools/Write", body, "Authorization", "Bearer agent-key")
	var w struct{ CallID, Status, StatusURL string }
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &struct {
		CallID    *string `json:"call_id"`
		Status    *string `json:"status"`
		StatusURL *string `json:"status_url"`
	}{&w.CallID, &w.Status, &w.StatusURL})
	if res.StatusCode != 202 || w.Status != "waiting" || res.Header.Get("Location") != w.StatusURL || res.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d body %s", res.StatusCode, raw)
	}
	pe.nextParked(t)
	// A retry while waiting attaches: nothing new is parked.
	res = post(t, pe.url+"/tools/Write", `{"content":"x", "path":"notes/a.txt"}`, "Authorization", "Bearer agent-key", "Prefer", "respond-async")
	if res.StatusCode != 202 || res.Header.Get(headerCallID) != w.CallID {
		t.Fatalf("retry: %d call %q, want 202 on %q", res.StatusCode, res.Header.Get(headerCallID), w.CallID)
	}
	select {
	case pc := <-pe.parked:
		t.Fatalf("a retry parked a second call %s", pc.ID)
	default:
	}
	if _, err := pe.store.Decide(context.Background(), w.CallID, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	pe.server.life.SweepOnce(context.Background(), 0)
	if n := len(pe.upstream.Requests()); n != 1 {
		t.Fatalf("sweeper: upstream got %d requests, want 1", n)
	}
	pe.server.life.SweepOnce(context.Background(), 0) // nothing left to do
	// Another subject cannot see it.
	req, _ := http.NewRequest("GET", pe.url+w.StatusURL, nil)
	other, _ := http.DefaultClient.Do(req)
	other.Body.Close()
	if other.StatusCode != 404 {
		t.Fatalf("anonymous saw agent-42's call: %d", other.StatusCode)
	}
	// An identical retry attaches to the executed, undelivered call and
	// gets its result without a second execution.
	res = post(t, pe.url+"/tools/Write", body, "Authorization", "Bearer agent-key")
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(got), `"ok":true`) || res.Header.Get(headerCallID) != w.CallID {
		t.Fatalf("retry after execution: %d %s", res.StatusCode, got)
	}
	if n := len(pe.upstream.Requests()); n != 1 {
		t.Fatalf("upstream got %d requests, want exactly 1", n)
	}
	// The status URL shows the result.
	req, _ = http.NewRequest("GET", pe.url+w.StatusURL, nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	st, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	_ = json.NewDecoder(st.Body).Decode(&doc)
	st.Body.Close()
	result, _ := doc["result"].(map[string]any)
	if doc["status"] != "executed" || result == nil || result["status"] != float64(200) || doc["decided_by"] != "alice" {
		t.Fatalf("status document %v", doc)
	}
	if body, _ := result["body"].(map[string]any); body["ok"] != true {
		t.Fatalf("result body %v", result["body"])
	}
	// Delivered: an identical call now is a new call.
	res = post(t, pe.url+"/tools/Write", body, "Authorization", "Bearer agent-key", "Prefer", "respond-async")
	if res.StatusCode != 202 || res.Header.Get(headerCallID) == w.CallID {
		t.Fatalf("after delivery: %d on %q, want a new call", res.StatusCode, res.Header.Get(headerCallID))
	}
}

func TestIdempotencyKey(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold = 50 * time.Millisecond })
	res := post(t, pe.url+"/tools/Write", `{"path":"a"}`, "Idempotency-Key", "k1")
	first := res.Header.Get(headerCallID)
	if res.StatusCode != 202 {
		t.Fatalf("status %d", res.StatusCode)
	}
	res = post(t, pe.url+"/tools/Write", `{"path":"a"}`, "Idempotency-Key", "k1", "Prefer", "respond-async")
	if res.StatusCode != 202 || res.Header.Get(headerCallID) != first {
		t.Fatalf("same key: %d %q want %q", res.StatusCode, res.Header.Get(headerCallID), first)
	}
	res = post(t, pe.url+"/tools/Write", `{"path":"b"}`, "Idempotency-Key", "k1")
	if p := readProblem(t, res); res.StatusCode != 409 {
		t.Fatalf("same key, other arguments: %d %+v", res.StatusCode, p)
	}
	// The stored request keeps one key: two are refused, not one dropped.
	res = post(t, pe.url+"/tools/Write", `{"path":"c"}`, "Idempotency-Key", "k2", "Idempotency-Key", "k3")
	if p := readProblem(t, res); res.StatusCode != 400 {
		t.Fatalf("two keys: %d %+v", res.StatusCode, p)
	}
}

func TestCancelAndExpire(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	pe := &parkEnv{parked: make(chan pending.Call, 16)}
	pe.store = pending.NewMemory(pending.Options{Now: clock.Now})
	pe.testEnv = newTestServer(t, askAll, func(c *Config) {
		c.Pending, c.Hold, c.TTL = pe.store, 50*time.Millisecond, time.Minute
		c.serverHook = func(s *Server) { pe.server = s }
	})
	res := post(t, pe.url+"/tools/Write", `{"path":"a"}`)
	id := res.Header.Get(headerCallID)
	req, _ := http.NewRequest("DELETE", pe.url+statusURL(id), nil)
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if pc, _ := pe.store.Get(context.Background(), id); del.StatusCode != 200 || pc.State != pending.Cancelled {
		t.Fatalf("DELETE: %d, state %s", del.StatusCode, pc.State)
	}
	res = post(t, pe.url+"/tools/Write", `{"path":"b"}`)
	id = res.Header.Get(headerCallID)
	clock.Advance(2 * time.Minute)
	pe.server.life.SweepOnce(context.Background(), 0)
	if pc, _ := pe.store.Get(context.Background(), id); pc.State != pending.Expired {
		t.Fatalf("after ttl: %s", pc.State)
	}
	if _, err := pe.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); !errors.Is(err, pending.ErrConflict) {
		t.Fatalf("approving an expired call: %v", err)
	}
	if len(pe.upstream.Requests()) != 0 {
		t.Fatal("an expired or cancelled call reached the upstream")
	}
}

// failingStore is a store whose every call fails, like an unreachable Redis.
type failingStore struct{ pending.Store }

// Park fails as a Redis that is down does: no connection (which does not
// say an earlier attempt was not sent: the call is abandoned, and this
// store fails that too).
func (failingStore) Park(context.Context, pending.Call, time.Duration) (pending.Call, bool, error) {
	return pending.Call{}, false, errRedisDown
}

func (failingStore) Cancel(context.Context, string) (pending.Call, error) {
	return pending.Call{}, errRedisDown
}

var errRedisDown = &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}, Err: errors.New("connect: connection refused")}

func TestStoreDownFailsClosed(t *testing.T) {
	pe := newTestServer(t, askAll, func(c *Config) { c.Pending = failingStore{} })
	res := post(t, pe.url+"/tools/Write", `{"path":"a"}`)
	p := readProblem(t, res)
	if res.StatusCode != 503 || p.Decision != "unavailable" || len(pe.upstream.Requests()) != 0 || strings.Contains(p.Detail, "6379") {
		t.Fatalf("status %d problem %+v", res.StatusCode, p)
	}
	noStore := newTestServer(t, askAll)
	res = post(t, noStore.url+"/tools/Write", `{"path":"a"}`)
	if p := readProblem(t, res); res.StatusCode != 503 || p.Decision != "ask" {
		t.Fatalf("without a store: %d %+v", res.StatusCode, p)
	}
}

func TestDrainAnswersHeldAgents(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold = 10 * time.Second })
	go func() {
		pe.nextParked(t)
		pe.server.Drain()
	}()
	start := time.Now()
	res := post(t, pe.url+"/tools/Write", `{"path":"a"}`)
	if res.StatusCode != 202 || time.Since(start) > 5*time.Second {
		t.Fatalf("held agent at drain: %d after %v", res.StatusCode, time.Since(start))
	}
	if pc, _ := pe.store.Get(context.Background(), res.Header.Get(headerCallID)); pc.State != pending.Waiting {
		t.Fatalf("the parked call is %s, want still waiting", pc.State)
	}
}

// heldServer is a test server deciding with d that holds asks for 3 s on
// a memory store, and reports each parked call on the channel.
func heldServer(t *testing.T, d Decider) (*testEnv, *pending.MemoryStore, chan pending.Call, *Server) {
	t.Helper()
	store := pending.NewMemory(pending.Options{})
	parked := make(chan pending.Call, 2)
	var server *Server
	env := newTestServer(t, d, func(c *Config) {
		c.Pending, c.Hold, c.TTL = store, 3*time.Second, time.Minute
		c.OnPark = func(pc pending.Call) { parked <- pc }
		c.serverHook = func(s *Server) { server = s }
	})
	return env, store, parked, server
}

// TestApprovedButNowDenied: the policy comes to deny a call after it was
// parked; the approval does not make it run (the deny is decided again).
func TestApprovedButNowDenied(t *testing.T) {
	var deny atomic.Bool
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		if deny.Load() {
			return policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{ID: "freeze", Message: "change freeze"}}}, nil
		}
		return askAll(context.Background(), in)
	})
	env, store, parked, server := heldServer(t, d)
	go func() {
		pc := <-parked
		deny.Store(true)
		_, _ = store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice", Comment: ""})
	}()
	res := post(t, env.url+"/tools/Write", `{"path":"a"}`)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 403 || !strings.Contains(string(body), "change freeze") || len(env.upstream.Requests()) != 0 {
		t.Fatalf("held: %d %s, upstream %d", res.StatusCode, body, len(env.upstream.Requests()))
	}
	// The sweeper path decides again too.
	deny.Store(false)
	res = post(t, env.url+"/tools/Write", `{"path":"b"}`, "Prefer", "respond-async")
	id := res.Header.Get(headerCallID)
	<-parked
	deny.Store(true)
	if _, err := store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	server.life.SweepOnce(context.Background(), 0)
	if pc, _ := store.Get(context.Background(), id); pc.State != pending.Failed || len(env.upstream.Requests()) != 0 {
		t.Fatalf("sweeper: state %s, upstream %d", pc.State, len(env.upstream.Requests()))
	}
}

// TestApprovedNearExpiryRuns: an approval in the last moments before the
// ttl still runs: the approval gives the call the store's approved window
// to be claimed in, past its first expiry; the grace still lets a holding
// replica go first.
func TestApprovedNearExpiryRuns(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold, c.TTL = 10*time.Millisecond, 400*time.Millisecond })
	res := post(t, pe.url+"/tools/Write", `{"path":"a"}`, "Prefer", "respond-async")
	id := res.Header.Get(headerCallID)
	pc, _ := pe.store.Get(context.Background(), id)
	time.Sleep(time.Until(pc.ExpiresAt) - 100*time.Millisecond)
	if _, err := pe.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(pc.ExpiresAt) + 200*time.Millisecond) // past the first expiry
	pe.server.life.SweepOnce(context.Background(), 0)
	if pc, _ := pe.store.Get(context.Background(), id); pc.State != pending.Executed || len(pe.upstream.Requests()) != 1 {
		t.Fatalf("state %s, upstream %d; want executed once", pc.State, len(pe.upstream.Requests()))
	}
	// Within the grace, a holder goes first.
	pe2 := newParkEnv(t, func(c *Config) { c.Hold, c.TTL = 10*time.Millisecond, time.Hour })
	res = post(t, pe2.url+"/tools/Write", `{"path":"b"}`, "Prefer", "respond-async")
	id = res.Header.Get(headerCallID)
	if _, err := pe2.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	pe2.server.life.SweepOnce(context.Background(), 10*time.Second)
	if pc, _ := pe2.store.Get(context.Background(), id); pc.State != pending.Approved || len(pe2.upstream.Requests()) != 0 {
		t.Fatalf("within the grace: state %s, upstream %d; want still approved", pc.State, len(pe2.upstream.Requests()))
	}
}

// TestRecheckKeepsAnnotations: the re-check of an approved call decides on
// the parked input whole, an MCP tool's annotations included.
func TestRecheckKeepsAnnotations(t *testing.T) {
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		if in.Tool != nil && in.Tool.Annotations["destructiveHint"] == true {
			return policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{Message: "destructive"}}}, nil
		}
		return policy.Decision{Action: policy.Allow}, nil
	})
	var server *Server
	newTestServer(t, d, func(c *Config) { c.serverHook = func(s *Server) { server = s } })
	in := &policy.Input{
		CallID: "c1", Kind: policy.KindMCP, Upstream: policy.Upstream{Name: "files", Protocol: "mcp"},
		Tool: policy.NewTool("wipe", map[string]any{"path": "a"}, policy.DefaultTargetArgs),
	}
	in.Tool.Annotations = map[string]any{"destructiveHint": true}
	info, err := json.Marshal(callinfo.Info{PolicyInput: callinfo.MarshalNoEscape(in)})
	if err != nil {
		t.Fatal(err)
	}
	ok, why := server.stillAllowed(t.Context(), pending.Call{ID: "c1", Upstream: server.cfg.Upstreams[0].Name, Info: info})
	if ok || why != "destructive" {
		t.Fatalf("stillAllowed = %v %q, want the deny the annotations call for", ok, why)
	}
}

// TestRecheckRefusesTwins: a call an earlier release parked with two
// arguments a loose binder reads as one (which this release refuses at
// the door) is refused at its re-check, whatever the policy says.
func TestRecheckRefusesTwins(t *testing.T) {
	var server *Server
	newTestServer(t, allowAll, func(c *Config) { c.serverHook = func(s *Server) { server = s } })
	in := &policy.Input{
		CallID: "c1", Kind: policy.KindREST, Upstream: policy.Upstream{Name: "files", Protocol: "rest"},
		Tool: policy.NewTool("purge", nil, policy.DefaultTargetArgs),
	}
	info, err := json.Marshal(callinfo.Info{PolicyInput: callinfo.MarshalNoEscape(in), Arguments: json.RawMessage(`{"dry_run":true,"dryRun":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := server.stillAllowed(t.Context(), pending.Call{ID: "c1", Upstream: server.cfg.Upstreams[0].Name, Info: info}); ok || !strings.Contains(why, "dryRun") {
		t.Fatalf("stillAllowed = %v %q, want the twins refused", ok, why)
	}
}

// TestRecheckHeldInputAsStored: an approved call that runs on the request
// that parked it is re-checked on the input that request holds, which is
// the document the call stored (the sweeper's re-check decodes that one):
// both re-checks see the same input, the stored arguments and hook ask
// included.
func TestRecheckHeldInputAsStored(t *testing.T) {
	var mu sync.Mutex
	var seen []*policy.Input
	d := deciderFunc(func(ctx context.Context, in *policy.Input) (policy.Decision, error) {
		mu.Lock()
		seen = append(seen, in)
		mu.Unlock()
		return askAll(ctx, in)
	})
	env, store, parked, server := heldServer(t, d)
	var id string
	go func() {
		pc := <-parked
		id = pc.ID
		_, _ = store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"})
	}()
	res := post(t, env.url+"/tools/Write", `{"path":"notes/a.md","n":12345.5,"deep":{"k":[1,"b"]}}`, "X-Trace", "t1")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || len(env.upstream.Requests()) != 1 {
		t.Fatalf("held: %d %s, upstream %d", res.StatusCode, body, len(env.upstream.Requests()))
	}
	pc, err := store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := server.stillAllowed(context.Background(), pc); !ok {
		t.Fatalf("the stored call's re-check refused it: %s", why)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("%d decisions, want the call's, its re-check while held and the stored call's", len(seen))
	}
	held, stored := seen[1], seen[2]
	if held == seen[0] || held.Tool == seen[0].Tool {
		t.Error("the held re-check decided on the request's own input, not a copy")
	}
	hj, err := held.AppendJSON(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sj, err := stored.AppendJSON(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(hj) != string(sj) || held.Hook != nil || stored.Hook != nil || held.Tool.Arguments["path"] != "notes/a.md" {
		t.Errorf("re-check inputs differ:\nheld:   %s (hook %v)\nstored: %s (hook %v)", hj, held.Hook, sj, stored.Hook)
	}
}

// TestDamagedCallUnreadable: a parked call whose record in Redis no longer
// decodes is answered as unreadable (500), not as a store that is away
// (503, "retry later"), and nothing is forwarded.
func TestDamagedCallUnreadable(t *testing.T) {
	addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		testkit.Unavailable(t, "no TOOLGATE_TEST_REDIS_ADDR: the Redis tests need a Redis")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	prefix := "toolgate-test:" + rand.Text() + ":"
	store, err := pending.NewRedis(rdb, pending.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env := newTestServer(t, askAll, func(c *Config) { c.Pending, c.TTL = store, time.Minute })
	res := post(t, env.url+"/tools/Write", `{"path":"a"}`, "Prefer", "respond-async")
	id := res.Header.Get(headerCallID)
	if res.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("park: %d", res.StatusCode)
	}
	key := "{" + strings.TrimSuffix(prefix, ":") + "}:call:" + id
	if err := rdb.Set(t.Context(), key, "waiting 999 1 2 3 0\ngarbage", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	status, err := http.Get(env.url + "/_toolgate/calls/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(status.Body)
	status.Body.Close()
	if status.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "Parked call unreadable") {
		t.Errorf("status of a damaged call: %d %s; want 500 Parked call unreadable", status.StatusCode, body)
	}
	if n := len(env.upstream.Requests()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
}

// TestParkWritesBrief: a parked call carries a Brief for lists of calls:
// its target, reasons and approvers, cut to size, without the arguments.
func TestParkWritesBrief(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes: cut at a rune boundary
	reasons := []policy.Reason{{ID: "r1", Message: "writes need a look " + long, Approvers: &policy.Approvers{Groups: []string{"sre"}, Min: 2}}}
	for i := range 9 {
		reasons = append(reasons, policy.Reason{ID: "extra" + string(rune('a'+i)), Message: "reason " + string(rune('a'+i))})
	}
	d := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		return policy.Decision{Action: policy.Ask, Reasons: reasons}, nil
	})
	pe := &parkEnv{store: pending.NewMemory(pending.Options{}), parked: make(chan pending.Call, 1)}
	pe.testEnv = newTestServer(t, d, func(c *Config) {
		c.Pending, c.TTL, c.MaxBodyBytes = pe.store, time.Minute, 64<<10
		c.OnPark = func(pc pending.Call) { pe.parked <- pc }
		c.Upstreams[0].Transport = nil
		c.Metrics = nil
	})
	target := "notes/" + strings.Repeat("t", 1000)
	content := strings.Repeat("secret-argument ", 256)
	body, _ := json.Marshal(map[string]string{"path": target, "content": content})
	res := post(t, pe.url+"/tools/Write", string(body), "Authorization", "Bearer agent-key", "Prefer", "respond-async")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202", res.StatusCode)
	}
	pc := pe.nextParked(t)
	stored, err := pe.store.Get(context.Background(), pc.ID)
	if err != nil {
		t.Fatal(err)
	}
	info := callinfo.Decode(stored.Info)
	brief, ok := callinfo.DecodeBrief(stored.Brief)
	if !ok || len(stored.Brief) > callinfo.MaxBrief {
		t.Fatalf("stored Brief (%d bytes, readable %v): %.300s", len(stored.Brief), ok, stored.Brief)
	}
	if strings.Contains(string(stored.Brief), "secret-argument") || strings.Contains(string(stored.Brief), "policy_input") {
		t.Errorf("the Brief holds the arguments or the policy input: %.300s", stored.Brief)
	}
	if brief.Kind != info.Kind || brief.Tool != "Write" || brief.Upstream != info.Upstream || brief.Subject != info.Subject ||
		brief.Method != http.MethodPost || brief.Path != info.Path {
		t.Errorf("Brief %+v does not match Info's kind, tool, upstream, subject, method and path", brief)
	}
	if len(brief.Target) > callinfo.MaxBriefText || !strings.HasPrefix(target, strings.TrimSuffix(brief.Target, "…")) || brief.Target == target {
		t.Errorf("Brief target %q (%d bytes), want %q cut to %d bytes", brief.Target, len(brief.Target), target, callinfo.MaxBriefText)
	}
	if len(brief.Reasons) != callinfo.MaxBriefReasons || len(brief.RuleIDs) != callinfo.MaxBriefReasons {
		t.Errorf("Brief has %d reasons and %d rule IDs, want %d of %d", len(brief.Reasons), len(brief.RuleIDs), callinfo.MaxBriefReasons, len(reasons))
	}
	if r := brief.Reasons[0]; len(r) > callinfo.MaxBriefText || !strings.HasPrefix(info.Reasons[0], strings.TrimSuffix(r, "…")) || !utf8.ValidString(r) {
		t.Errorf("Brief reason %q (%d bytes), want Info's cut to %d bytes", r, len(r), callinfo.MaxBriefText)
	}
	if diff := cmp.Diff(info.Approvers, brief.Approvers); diff != "" || len(brief.Approvers) != 1 {
		t.Errorf("Brief approvers (-info +brief):\n%s", diff)
	}
	// Nine reasons named nobody: any approver answers them, and the
	// requester alone may not (callinfo.Info.OpenAsk).
	if !info.OpenAsk {
		t.Error("a call with ask reasons naming nobody is not marked OpenAsk")
	}
}

// noneParked checks that no call was parked since the last nextParked:
// OnPark was not called.
func (pe *parkEnv) noneParked(t *testing.T, what string) {
	t.Helper()
	select {
	case pc := <-pe.parked:
		t.Fatalf("%s parked a new call %s (approvers asked again)", what, pc.ID)
	default:
	}
}

// TestRetryLearnsRejection: the agent's hold ran out, then an approver
// rejected the call with a comment. An identical retry (arguments in
// another order) attaches and gets the rejection with the comment, as the
// held request would have; the next identical retry is a new call and
// asks the approvers again.
func TestRetryLearnsRejection(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold = 50 * time.Millisecond })
	auth := []string{"Authorization", "Bearer agent-key"}
	res := post(t, pe.url+"/tools/Write", `{"path":"notes/a.txt","content":"x"}`, auth...)
	res.Body.Close()
	first := pe.nextParked(t)
	if res.StatusCode != http.StatusAccepted || res.Header.Get(headerCallID) != first.ID {
		t.Fatalf("first call: %d on %q, want 202 on %s", res.StatusCode, res.Header.Get(headerCallID), first.ID)
	}
	if _, err := pe.store.Decide(context.Background(), first.ID, pending.Decision{To: pending.Rejected, By: "carol", Comment: "not on a Friday"}); err != nil {
		t.Fatal(err)
	}

	res = post(t, pe.url+"/tools/Write", `{"content":"x", "path":"notes/a.txt"}`, auth...)
	p := readProblem(t, res)
	if res.StatusCode != http.StatusForbidden || p.Decision != "rejected" || p.CallID != first.ID || p.Detail != "rejected by carol: not on a Friday" {
		t.Fatalf("retry after the rejection: %d %+v; want 403 rejected on %s with the comment", res.StatusCode, p, first.ID)
	}
	pe.noneParked(t, "the retry that learnt the rejection")
	if pc, _ := pe.store.Get(context.Background(), first.ID); !pc.Delivered || pc.DecidedBy != "carol" {
		t.Errorf("the rejected call: delivered %v, decided by %q; want delivered, by carol", pc.Delivered, pc.DecidedBy)
	}

	res = post(t, pe.url+"/tools/Write", `{"path":"notes/a.txt","content":"x"}`, append(auth, "Prefer", "respond-async")...)
	res.Body.Close()
	again := pe.nextParked(t)
	if res.StatusCode != http.StatusAccepted || again.ID == first.ID || res.Header.Get(headerCallID) != again.ID {
		t.Fatalf("second retry: %d on %q, want 202 on a new call", res.StatusCode, res.Header.Get(headerCallID))
	}
	if n := len(pe.upstream.Requests()); n != 0 {
		t.Errorf("upstream got %d requests", n)
	}
}

// TestRetryLearnsExpiry: a call that expired while nobody was held: the
// identical retry gets the expiry once, the next one asks again.
func TestRetryLearnsExpiry(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	pe := newParkEnv(t, func(c *Config) {
		c.Hold = 50 * time.Millisecond
		c.Pending = pending.NewMemory(pending.Options{Now: clock.Now})
	})
	pe.store = pe.server.cfg.Pending
	res := post(t, pe.url+"/tools/Write", `{"path":"a","content":"x"}`)
	res.Body.Close()
	first := pe.nextParked(t)
	clock.Advance(2 * time.Minute) // past the ttl, unswept

	res = post(t, pe.url+"/tools/Write", `{"content":"x","path":"a"}`)
	p := readProblem(t, res)
	if res.StatusCode != http.StatusForbidden || p.Decision != "expired" || p.CallID != first.ID {
		t.Fatalf("retry after the expiry: %d %+v; want 403 expired on %s", res.StatusCode, p, first.ID)
	}
	pe.noneParked(t, "the retry that learnt the expiry")

	res = post(t, pe.url+"/tools/Write", `{"content":"x","path":"a"}`, "Prefer", "respond-async")
	res.Body.Close()
	again := pe.nextParked(t)
	if res.StatusCode != http.StatusAccepted || again.ID == first.ID {
		t.Fatalf("second retry: %d on %q, want 202 on a new call", res.StatusCode, res.Header.Get(headerCallID))
	}
}

// TestKeylessRetryAttachesToKeyed: a call parked with an Idempotency-Key is
// found by an identical retry without the key (arguments in another
// order): the approvers are asked once. The key with other arguments is
// still 409.
func TestKeylessRetryAttachesToKeyed(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold = 50 * time.Millisecond })
	res := post(t, pe.url+"/tools/Write", `{"path":"a","content":"x"}`, "Idempotency-Key", "k1")
	res.Body.Close()
	first := pe.nextParked(t)
	if res.StatusCode != http.StatusAccepted || res.Header.Get(headerCallID) != first.ID {
		t.Fatalf("keyed call: %d on %q", res.StatusCode, res.Header.Get(headerCallID))
	}
	res = post(t, pe.url+"/tools/Write", `{"content":"x","path":"a"}`, "Prefer", "respond-async")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || res.Header.Get(headerCallID) != first.ID {
		t.Fatalf("keyless retry: %d on %q, want 202 on %s", res.StatusCode, res.Header.Get(headerCallID), first.ID)
	}
	pe.noneParked(t, "the keyless retry")
	res = post(t, pe.url+"/tools/Write", `{"path":"b","content":"x"}`, "Idempotency-Key", "k1")
	if p := readProblem(t, res); res.StatusCode != http.StatusConflict {
		t.Fatalf("same key, other arguments: %d %+v", res.StatusCode, p)
	}
	pe.noneParked(t, "the key with other arguments")

	// Approved, the keyless retry takes the result of the one execution.
	if _, err := pe.store.Decide(context.Background(), first.ID, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	res = post(t, pe.url+"/tools/Write", `{"content":"x","path":"a"}`)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get(headerCallID) != first.ID || !strings.Contains(string(body), `"ok":true`) {
		t.Fatalf("keyless retry after the approval: %d on %q %s", res.StatusCode, res.Header.Get(headerCallID), body)
	}
	if n := len(pe.upstream.Requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}

// TestToolgatePrefixNeverForwarded: /_toolgate/ is toolgate's: a path
// under it that names no call is answered 404, never sent upstream, and a
// long-poll's wait is a duration or seconds, anything else 400.
func TestToolgatePrefixNeverForwarded(t *testing.T) {
	pe := newParkEnv(t)
	for _, p := range []string{"/_toolgate/calls/", "/_toolgate/", "/_toolgate", "/_toolgate/other", "/_toolgate/calls/x/y"} {
		res := post(t, pe.url+p, `{}`, "Authorization", "Bearer agent-key")
		if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("POST %s: %d %s, want a 404 problem", p, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if res.Header.Get(headerCallID) == "" {
			t.Errorf("POST %s: answered without a call ID", p)
		}
		res.Body.Close()
	}
	if n := len(pe.upstream.Requests()); n != 0 {
		t.Fatalf("the upstream received %d requests under /_toolgate/", n)
	}
	res := post(t, pe.url+"/tools/Write", `{"path":"a"}`, "Authorization", "Bearer agent-key", "Prefer", "respond-async")
	res.Body.Close()
	id := res.Header.Get(headerCallID)
	for _, tc := range []struct {
		wait string
		want int
	}{{"abc", 400}, {"-1s", 400}, {"1.5", 400}, {"0", 200}, {"", 200}, {"0s", 200}} {
		req, _ := http.NewRequest(http.MethodGet, pe.url+"/_toolgate/calls/"+id+"?wait="+tc.wait, nil)
		req.Header.Set("Authorization", "Bearer agent-key")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("?wait=%s: %d, want %d", tc.wait, res.StatusCode, tc.want)
		}
		if d := res.Header.Get(headerDecision); res.StatusCode == 200 && d != "ask" {
			t.Errorf("a waiting call's status: X-Toolgate-Decision %q, want ask", d)
		}
	}
}

func TestParseWait(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"2", 2 * time.Second, true},
		{"30s", 30 * time.Second, true},
		{"1m", time.Minute, true},
		{"abc", 0, false},
		{"-2s", 0, false},
		{"-2", 0, false},
		{"99999999999", 0, false},
	} {
		got, ok := parseWait(tc.in)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("parseWait(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCheckPrefixRefusesToolgates(t *testing.T) {
	for p, ok := range map[string]bool{"/": true, "/notes/": true, "/_toolgate/": false, "/_toolgate/x/": false, "/_toolgatex/": true} {
		if err := CheckPrefix(p); (err == nil) != ok {
			t.Errorf("CheckPrefix(%q) = %v, want ok %v", p, err, ok)
		}
	}
}

// TestParkListsHeaders: a parked call's display record lists the headers
// approving will send: the agent's, a credential's value hidden, none of
// toolgate's own or of those it removes. The approved call still sends
// them all, as before, and the policy input still holds no credential.
func TestParkListsHeaders(t *testing.T) {
	pe := newParkEnv(t)
	approved := make(chan callinfo.Info, 1)
	go func() {
		pc := pe.nextParked(t)
		approved <- callinfo.Decode(pc.Info)
		if _, err := pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Error(err)
		}
	}()
	body := `{"path":"notes/a.txt","content":"innocent"}`
	res := post(t, pe.url+"/tools/Write", body, "Authorization", "Bearer agent-key",
		"X-Target-Override", "/etc/shadow", "X-Api-Key", "someone-elses-key", "Cookie", "session=admin",
		"X-Forwarded-For", "6.6.6.6", "X-Toolgate-Subject", "root")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want the approved call's 200", res.StatusCode)
	}
	info := <-approved

	if info.Headers == nil {
		t.Fatal("the parked call lists no headers")
	}
	got := map[string]callinfo.Header{}
	for _, h := range info.Headers.List {
		got[h.Name] = h
	}
	for name, want := range map[string]callinfo.Header{
		"X-Target-Override": {Name: "X-Target-Override", Value: "/etc/shadow"},
		"X-Api-Key":         {Name: "X-Api-Key", Hidden: true, Size: len("someone-elses-key")},
		"Cookie":            {Name: "Cookie", Hidden: true, Size: len("session=admin")},
		"Content-Type":      {Name: "Content-Type", Value: "application/json"},
	} {
		if got[name] != want {
			t.Errorf("header %s listed as %+v, want %+v", name, got[name], want)
		}
	}
	for _, name := range []string{"Authorization", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Toolgate-Subject", "Content-Length"} {
		if _, ok := got[name]; ok {
			t.Errorf("header %s listed: toolgate's own, or never sent", name)
		}
	}
	if strings.Contains(string(callinfo.MarshalNoEscape(info)), "someone-elses-key") || strings.Contains(string(callinfo.MarshalNoEscape(info)), "session=admin") {
		t.Error("a credential's value is in the display record")
	}
	if in := string(info.PolicyInput); strings.Contains(in, "someone-elses-key") || strings.Contains(in, "session=admin") || !strings.Contains(in, "/etc/shadow") {
		t.Errorf("the policy input changed: %s", in)
	}

	reqs := pe.upstream.Requests()
	if len(reqs) != 1 || string(reqs[0].Body) != body {
		t.Fatalf("upstream got %d requests: %+v", len(reqs), reqs)
	}
	h := reqs[0].Header
	if h.Get("X-Target-Override") != "/etc/shadow" || h.Get("X-Api-Key") != "someone-elses-key" || h.Get("Cookie") != "session=admin" {
		t.Errorf("the approved call did not send the agent's headers: %v", h)
	}
	if h.Get("Authorization") != "" || h.Get("X-Toolgate-Subject") == "root" || h.Get("X-Forwarded-For") == "6.6.6.6" {
		t.Errorf("the approved call sent what toolgate removes: %v", h)
	}
}

// TestParkShowsEveryBodyByte: a plain HTTP call's body that is not UTF-8
// is shown with each such byte as \xNN (and a backslash doubled), never a
// run of them folded into one U+FFFD: the approver sees what is sent and
// how much. The upstream gets the bytes as they came.
func TestParkShowsEveryBodyByte(t *testing.T) {
	pe := newParkEnv(t)
	shown := make(chan callinfo.Info, 1)
	go func() {
		pc := pe.nextParked(t)
		shown <- callinfo.Decode(pc.Info)
		if _, err := pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Error(err)
		}
	}()
	body := "name=report.txt;" + strings.Repeat("\xe9", 64) + `;dir=C:\x;mode=keep`
	res := post(t, pe.url+"/upload", body, "Authorization", "Bearer agent-key", "Content-Type", "", "Content-Type", "text/plain; charset=iso-8859-1")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want the approved call's 200", res.StatusCode)
	}
	var got string
	if err := json.Unmarshal((<-shown).Arguments, &got); err != nil {
		t.Fatal(err)
	}
	if want := "name=report.txt;" + strings.Repeat(`\xE9`, 64) + `;dir=C:\\x;mode=keep`; got != want {
		t.Errorf("the approver is shown %q, want %q", got, want)
	}
	if reqs := pe.upstream.Requests(); len(reqs) != 1 || string(reqs[0].Body) != body {
		t.Errorf("upstream got %+v, want the body as sent", reqs)
	}
}

// TestOpenAskStoredForEveryRelease: a requester-only reason beside one
// that names nobody leaves the call to an approver (Info.OpenAsk). Its
// requirements are stored as any approver's, not the requester's, so a
// replica of an earlier release sharing the store during a rolling
// upgrade, which reads the requirements but not OpenAsk, neither offers
// the requester a confirmation nor takes one.
func TestOpenAskStoredForEveryRelease(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) {
		c.Decider = seedEngineRules(t, `rules:
  - {id: c1, effect: ask, tool: Write, target: "*", approvers: {requester: true}}
  - {id: a1, effect: ask, tool: Write, target: "notes/*"}
`)
		c.Hold = 10 * time.Millisecond
	})
	if res := post(t, pe.url+"/tools/Write", `{"path":"notes/a"}`, "Authorization", "Bearer agent-key"); res.StatusCode != http.StatusAccepted {
		t.Fatalf("ask: %d", res.StatusCode)
	}
	info := callinfo.Decode(pe.nextParked(t).Info)
	if !info.OpenAsk || len(info.Approvers) != 1 {
		t.Fatalf("info: open ask %v, requirements %+v", info.OpenAsk, info.Approvers)
	}
	if a := info.Approvers[0]; a.Requester || a.RequesterOnly() || !a.Open() || info.RequesterConfirms() || info.NamesApprovers() {
		t.Errorf("requirement %+v: want any approver's, the requester's confirmation taken nowhere", a)
	}
	// Without the open ask the requester may confirm, as before.
	if res := post(t, pe.url+"/tools/Write", `{"path":"other/a"}`, "Authorization", "Bearer agent-key"); res.StatusCode != http.StatusAccepted {
		t.Fatalf("ask: %d", res.StatusCode)
	}
	if info := callinfo.Decode(pe.nextParked(t).Info); info.OpenAsk || !info.RequesterConfirms() {
		t.Errorf("a requester-only call: open ask %v, requester confirms %v", info.OpenAsk, info.RequesterConfirms())
	}
}
