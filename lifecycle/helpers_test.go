package lifecycle

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// Durations of the tests. Nothing a test waits for is a sleep: it polls
// with a deadline, so a loaded machine is slower, never wrong.
const (
	long     = time.Minute      // a hold, ttl or lease that never runs out in a test
	deadline = 10 * time.Second // how long a test waits for what must happen
)

// newMemory returns a memory store on a clock that starts at start and
// moves only when the test moves it.
func newMemory(start time.Time, resultTTL time.Duration) (*pending.MemoryStore, *testkit.Clock) {
	c := testkit.NewClock(start)
	return pending.NewMemory(pending.Options{Now: c.Now, ResultTTL: resultTTL}), c
}

// redisAddr returns the test Redis: $TOOLGATE_TEST_REDIS_ADDR.
func redisAddr(tb testing.TB) string {
	tb.Helper()
	addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		testkit.Unavailable(tb, "no TOOLGATE_TEST_REDIS_ADDR: the Redis tests need a Redis")
	}
	return addr
}

// newRedis returns a Redis store with a prefix of its own (a shared Redis
// keeps the keys of earlier runs), closed at the end; the index keys,
// which have no TTL, are deleted then.
func newRedis(tb testing.TB) *pending.RedisStore {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(tb), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(tb.Context()).Err(); err != nil {
		tb.Fatalf("test Redis: %v", err)
	}
	tag := "toolgate-lifecycle-test:" + rand.Text()
	s, err := pending.NewRedis(rdb, pending.Options{Prefix: tag + ":", PollInterval: 50 * time.Millisecond, ApprovedWindow: approvedWindow})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		base := "{" + tag + "}:"
		keys := []string{base + "due"}
		for _, st := range []pending.State{
			pending.Waiting, pending.Approved, pending.Executing, pending.Executed, pending.Rejected,
			pending.Expired, pending.Failed, pending.Unknown, pending.Cancelled,
		} {
			keys = append(keys, base+"state:"+string(st))
		}
		rdb.Del(context.Background(), keys...)
	})
	return s
}

// eachStore runs test against a memory store (on the real clock, as Redis
// has no other) and a Redis store.
func eachStore(t *testing.T, test func(t *testing.T, s pending.Store)) {
	t.Run("memory", func(t *testing.T) { test(t, pending.NewMemory(pending.Options{ApprovedWindow: approvedWindow})) })
	t.Run("redis", func(t *testing.T) { test(t, newRedis(t)) })
}

// approvedWindow is the stores' approved window here: an approval does not
// move a call's expiry, so the tests of expiry keep their short ttls (the
// window itself is the store's, tested in pending).
const approvedWindow = time.Millisecond

// fakeExec is the Executor of the tests: it records what it ran, answers
// with a result naming the call, and blocks while its gate is closed.
type fakeExec struct {
	state pending.State
	lease time.Duration

	mu      sync.Mutex
	runs    map[string]int
	claimed []pending.Call // the calls Execute got, in order
	leased  []string       // the IDs Lease was asked about
	gate    chan struct{}  // nil, or closed by release
	started chan string    // the ID of every call Execute starts
}

func newExec() *fakeExec {
	return &fakeExec{state: pending.Executed, lease: long, runs: map[string]int{}, started: make(chan string, 1000)}
}

// hold makes Execute block until release.
func (e *fakeExec) hold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gate = make(chan struct{})
}

func (e *fakeExec) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.gate)
}

func resultOf(id string) pending.Result {
	return pending.Result{Status: 201, Header: map[string][]string{"X-Call": {id}}, Body: []byte(`{"ran":"` + id + `"}`)}
}

func (e *fakeExec) Execute(_ context.Context, pc pending.Call) (pending.State, pending.Result) {
	e.mu.Lock()
	e.runs[pc.ID]++
	e.claimed = append(e.claimed, pc)
	gate := e.gate
	e.mu.Unlock()
	e.started <- pc.ID
	if gate != nil {
		<-gate
	}
	return e.state, resultOf(pc.ID)
}

func (e *fakeExec) Lease(pc pending.Call) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leased = append(e.leased, pc.ID)
	return e.lease
}

// claims returns the calls Execute got, in order.
func (e *fakeExec) claims() []pending.Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]pending.Call(nil), e.claimed...)
}

// leases returns the IDs Lease was asked about, in order.
func (e *fakeExec) leases() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.leased...)
}

// count returns how many times Execute ran id.
func (e *fakeExec) count(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[id]
}

// total returns how many times Execute ran, all calls together.
func (e *fakeExec) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.runs {
		n += c
	}
	return n
}

// waitStarted waits until Execute starts a call, and returns its ID.
func (e *fakeExec) waitStarted(t *testing.T) string {
	t.Helper()
	select {
	case id := <-e.started:
		return id
	case <-time.After(deadline):
		t.Fatal("the executor never started")
		return ""
	}
}

// events records OnPark and OnResolve.
type events struct {
	mu       sync.Mutex
	parked   []pending.Call
	resolved []pending.Call
	parkedCh chan pending.Call
}

func newEvents() *events { return &events{parkedCh: make(chan pending.Call, 1000)} }

func (ev *events) onPark(pc pending.Call) {
	ev.mu.Lock()
	ev.parked = append(ev.parked, pc)
	ev.mu.Unlock()
	ev.parkedCh <- pc
}

func (ev *events) onResolve(pc pending.Call) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.resolved = append(ev.resolved, pc)
}

func (ev *events) parks() []pending.Call {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]pending.Call(nil), ev.parked...)
}

func (ev *events) resolves() []pending.Call {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]pending.Call(nil), ev.resolved...)
}

// waitParked waits for the next OnPark and returns its call.
func (ev *events) waitParked(t *testing.T) pending.Call {
	t.Helper()
	select {
	case pc := <-ev.parkedCh:
		return pc
	case <-time.After(deadline):
		t.Fatal("OnPark was never called")
		return pending.Call{}
	}
}

// checkResolved checks that OnResolve was called exactly once for id, with
// state want.
func (ev *events) checkResolved(t *testing.T, id string, want pending.State) {
	t.Helper()
	n := 0
	for _, pc := range ev.resolves() {
		if pc.ID != id {
			continue
		}
		n++
		if pc.State != want {
			t.Errorf("OnResolve(%s) with state %s, want %s", id, pc.State, want)
		}
	}
	if n != 1 {
		t.Errorf("OnResolve called %d times for %s, want once", n, id)
	}
}

// newLifecycle returns a Lifecycle on s with exec, recording into ev.
func newLifecycle(t *testing.T, s pending.Store, exec *fakeExec, ev *events) *Lifecycle {
	t.Helper()
	l, err := New(Config{Store: s, Executor: exec, TTL: time.Hour, OnPark: ev.onPark, OnResolve: ev.onResolve})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Drain)
	return l
}

// newCall returns a call to park, with a new ID and no attach key.
func newCall() pending.Call {
	id := "call-" + rand.Text()
	return pending.Call{
		ID:            id,
		ArgsDigest:    "sha256:args",
		Subject:       "alice",
		Upstream:      "notes",
		Tool:          "notes.delete",
		Request:       []byte(`POST /tools/notes.delete {"id":42}`),
		RequestDigest: "sha256:" + id,
		Info:          []byte(`{"tool":"notes.delete"}`),
	}
}

// retry returns a retry of pc: a new request (ID) with pc's attach keys.
func retry(pc pending.Call) pending.Call {
	r := newCall()
	r.AttachKey, r.ArgsKey, r.ArgsDigest = pc.AttachKey, pc.ArgsKey, pc.ArgsDigest
	return r
}

// withKey returns pc with a new attach key.
func withKey(pc pending.Call) pending.Call {
	pc.AttachKey = "key-" + rand.Text()
	return pc
}

// ask runs l.Ask in a goroutine; the outcome arrives on the channel.
func ask(ctx context.Context, l *Lifecycle, pc pending.Call, h Hold) <-chan Outcome {
	ch := make(chan Outcome, 1)
	go func() { ch <- l.Ask(ctx, pc, h) }()
	return ch
}

// outcome waits for an Ask's outcome.
func outcome(t *testing.T, ch <-chan Outcome) Outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(deadline):
		t.Fatal("Ask never returned")
		return Outcome{}
	}
}

// stillHeld checks that an Ask has not returned.
func stillHeld(t *testing.T, ch <-chan Outcome) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("Ask returned %s before the call was decided", describe(o))
	default:
	}
}

func describe(o Outcome) string {
	names := []string{"Waiting", "Ended", "Delivered", "Taken", "NoResult", "KeyReused", "NotParked", "StoreFailed", "Lost", "Gone", "TooMany"}
	name := "Kind(" + strconv.Itoa(int(o.Kind)) + ")"
	if int(o.Kind) >= 0 && int(o.Kind) < len(names) {
		name = names[o.Kind]
	}
	var b strings.Builder
	b.WriteString(name + " " + o.Call.ID + " " + string(o.Call.State))
	if o.Err != nil {
		b.WriteString(" err=" + o.Err.Error())
	}
	return b.String()
}

// get returns the call as the store has it.
func get(t *testing.T, s pending.Store, id string) pending.Call {
	t.Helper()
	pc, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return pc
}

func decide(t *testing.T, s pending.Store, id string, to pending.State) {
	t.Helper()
	if _, err := s.Decide(t.Context(), id, pending.Decision{To: to, By: "bob", Comment: "ok"}); err != nil {
		t.Fatalf("Decide(%s, %s): %v", id, to, err)
	}
}

// hookStore is a real store with some of its methods replaced.
type hookStore struct {
	pending.Store
	park  func(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error)
	wait  func(ctx context.Context, id string, from pending.State) (pending.Call, error)
	claim func(ctx context.Context, id string, lease time.Duration) (pending.Call, error)
}

func (h *hookStore) Park(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error) {
	if h.park != nil {
		return h.park(ctx, c, ttl)
	}
	return h.Store.Park(ctx, c, ttl)
}

func (h *hookStore) Wait(ctx context.Context, id string, from pending.State) (pending.Call, error) {
	if h.wait != nil {
		return h.wait(ctx, id, from)
	}
	return h.Store.Wait(ctx, id, from)
}

// WaitHeld goes through the wait hook too: a test that holds up Wait
// holds up the held request.
func (h *hookStore) WaitHeld(ctx context.Context, id string, from pending.State) (pending.Call, error) {
	if h.wait != nil {
		return h.wait(ctx, id, from)
	}
	return h.Store.WaitHeld(ctx, id, from)
}

func (h *hookStore) Claim(ctx context.Context, id string, lease time.Duration) (pending.Call, error) {
	if h.claim != nil {
		return h.claim(ctx, id, lease)
	}
	return h.Store.Claim(ctx, id, lease)
}

var errDown = errors.New("store: connection refused")
