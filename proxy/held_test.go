package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// TestHeldPerSubject: a principal with MaxHeldPerSubject requests held has
// its next ask answered at once (202, parked all the same) and its next
// long-poll too, while another principal is still held; a place given
// back holds again.
func TestHeldPerSubject(t *testing.T) {
	const hold = 5 * time.Second
	pe := newParkEnv(t, func(c *Config) { c.Hold = hold; c.MaxHeldPerSubject = 2 })
	approve := func(id string) {
		t.Helper()
		if _, err := pe.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Error(err)
		}
	}
	type answer struct {
		status int
		took   time.Duration
	}
	ask := func(n int, header ...string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			start := time.Now()
			res := post(t, pe.url+"/tools/Write", `{"path":"notes/`+strconv.Itoa(n)+`.txt"}`, header...)
			_, _ = io.Copy(io.Discard, res.Body)
			out <- answer{res.StatusCode, time.Since(start)}
		}()
		return out
	}
	agent := []string{"Authorization", "Bearer agent-key"}

	held := []<-chan answer{ask(1, agent...), ask(2, agent...)}
	ids := []string{pe.nextParked(t).ID, pe.nextParked(t).ID}

	// The third is parked but not held.
	a := <-ask(3, agent...)
	third := pe.nextParked(t)
	if a.status != http.StatusAccepted || a.took > hold/2 {
		t.Fatalf("third ask: %d after %v, want 202 at once", a.status, a.took)
	}
	// A long-poll of the same principal is answered at once as well.
	start := time.Now()
	req, _ := http.NewRequest(http.MethodGet, pe.url+"/_toolgate/calls/"+third.ID+"?wait=5s", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if took := time.Since(start); res.StatusCode != http.StatusOK || took > hold/2 {
		t.Fatalf("long-poll: %d after %v, want 200 at once", res.StatusCode, took)
	}
	var m dto.Metric
	if err := pe.server.metrics.notHeld.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 2 {
		t.Errorf("toolgate_requests_not_held_total = %v, want 2", got)
	}

	// Another principal is held: it waits for, and gets, the result.
	other := ask(4) // anonymous
	approve(pe.nextParked(t).ID)
	if a := <-other; a.status != http.StatusOK {
		t.Fatalf("another principal's ask: %d, want 200 after its approval", a.status)
	}

	// The two held asks end; their places are given back.
	for _, id := range ids {
		approve(id)
	}
	for i := range held {
		if a := <-held[i]; a.status != http.StatusOK {
			t.Fatalf("held ask %d: %d after %v, want 200", i+1, a.status, a.took)
		}
	}
	again := ask(5, agent...)
	approve(pe.nextParked(t).ID)
	if a := <-again; a.status != http.StatusOK {
		t.Fatalf("ask after the places came back: %d, want 200 (held until approved)", a.status)
	}
}

// TestHeldLimitCounts: take and done pair per principal, and a bound of
// zero bounds nothing.
func TestHeldLimitCounts(t *testing.T) {
	l := newPrincipalLimit(2)
	for i, want := range []bool{true, true, false} {
		if got := l.take("a"); got != want {
			t.Fatalf("take %d of a: %v, want %v", i+1, got, want)
		}
	}
	if !l.take("b") {
		t.Fatal("b's places are its own")
	}
	l.done("a")
	for i, want := range []bool{true, false} {
		if got := l.take("a"); got != want {
			t.Fatalf("a place given back, take %d: %v, want %v", i+1, got, want)
		}
	}
	l.done("a")
	l.done("a")
	l.done("b")
	if len(l.n) != 0 {
		t.Fatalf("counts left: %v", l.n)
	}
	unbounded := newPrincipalLimit(0)
	for range 1000 {
		if !unbounded.take("a") {
			t.Fatal("no bound refused a place")
		}
	}
}

// TestMCPStreamsHeldPerSubject: an MCP GET stream, open for as long as the
// upstream keeps it, takes one of its principal's held places: past
// MaxHeldPerSubject a new stream is 429 and never reaches the upstream,
// another principal's is not, and a stream closed gives its place back.
func TestMCPStreamsHeldPerSubject(t *testing.T) {
	env, opened := streamingEnv(t, readNotDelete(t))
	stream := func(key string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.url+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			if line, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil || line != ": open\n" {
				t.Fatalf("stream: %q, %v", line, err)
			}
		}
		return res, func() { cancel(); res.Body.Close() }
	}
	first, closeFirst := stream("agent-key")
	second, closeSecond := stream("agent-key")
	defer closeSecond()
	if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK {
		t.Fatalf("two streams: %d, %d, want 200", first.StatusCode, second.StatusCode)
	}
	third, closeThird := stream("agent-key")
	var body []byte
	if third.StatusCode != http.StatusOK {
		body, _ = io.ReadAll(third.Body)
	}
	closeThird()
	if third.StatusCode != http.StatusTooManyRequests || third.Header.Get("Retry-After") == "" {
		t.Fatalf("a third stream: %d (Retry-After %q) %s, want 429", third.StatusCode, third.Header.Get("Retry-After"), body)
	}
	if n := opened.Load(); n != 2 {
		t.Fatalf("the upstream opened %d streams, want 2", n)
	}
	var m dto.Metric
	if err := env.server.metrics.notHeld.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("toolgate_requests_not_held_total = %v, want 1", got)
	}
	anon, closeAnon := stream("")
	defer closeAnon()
	if anon.StatusCode != http.StatusOK {
		t.Fatalf("another principal's stream: %d, want 200", anon.StatusCode)
	}
	closeFirst()
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, closeAgain := stream("agent-key")
		closeAgain()
		if again.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a stream after one closed: %d, want 200 once its place came back", again.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamingEnv is a toolgate deciding with d in front of an MCP upstream
// whose every answer is an SSE stream it keeps open until its reader goes,
// with MaxHeldPerSubject 2; opened counts the streams the upstream opened.
func streamingEnv(t *testing.T, d Decider) (env *testEnv, opened *atomic.Int32) {
	t.Helper()
	opened = &atomic.Int32{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opened.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": open\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // as a server's stream: open until its reader goes
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env = newTestServer(t, d, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
		c.MaxHeldPerSubject = 2
	})
	return env, opened
}

// TestListenStreamsHeldPerSubject: a subscriptions/listen is answered by
// a stream the server keeps open, as the GET stream is, and takes a held
// place as that does: past MaxHeldPerSubject a new one is 429, unsent.
func TestListenStreamsHeldPerSubject(t *testing.T) {
	allow := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		return policy.Decision{Action: policy.Allow}, nil
	})
	env, opened := streamingEnv(t, allow)
	listen := func(id int) (int, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`, id)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer agent-key")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			if line, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil || line != ": open\n" {
				t.Fatalf("stream: %q, %v", line, err)
			}
		}
		return res.StatusCode, func() { cancel(); res.Body.Close() }
	}
	for i := range 2 {
		status, done := listen(i)
		defer done()
		if status != http.StatusOK {
			t.Fatalf("listen %d: %d, want 200", i, status)
		}
	}
	status, done := listen(3)
	done()
	if status != http.StatusTooManyRequests {
		t.Errorf("a third listen: %d, want 429", status)
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("the upstream opened %d streams, want 2", n)
	}
}

// TestForwardsPerSubject: past MaxForwardsPerSubject calls of one
// principal being forwarded at once, another allowed call of it is 429
// and never reaches the upstream; another principal's is forwarded, and a
// call answered gives its place back.
func TestForwardsPerSubject(t *testing.T) {
	var got atomic.Int32
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), "slow") {
			<-release
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(up.Close)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before up.Close, on a failure too
	upURL, _ := url.Parse(up.URL)
	env := newTestServer(t, readNotDelete(t), func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Prefix: "/", Timeout: 10 * time.Second}}
		c.MaxForwardsPerSubject = 2
	})
	call := func(key, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, env.url+"/tools/read_file", strings.NewReader(`{"path":"`+path+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	slow := make(chan int, 2)
	for range 2 {
		go func() {
			if res := call("agent-key", "slow.txt"); res != nil {
				slow <- res.StatusCode
			}
		}()
	}
	testkit.WaitFor(t, "two calls at the upstream", func() bool { return got.Load() == 2 })
	res := call("agent-key", "fast.txt")
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("a third call in flight: %d (Retry-After %q), want 429", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if n := got.Load(); n != 2 {
		t.Fatalf("the upstream got %d calls, want 2: the refused one never reaches it", n)
	}
	var m dto.Metric
	if err := env.server.metrics.notForwarded.Write(&m); err != nil {
		t.Fatal(err)
	}
	if v := m.GetCounter().GetValue(); v != 1 {
		t.Errorf("toolgate_calls_not_forwarded_total = %v, want 1", v)
	}
	if res := call("", "fast.txt"); res.StatusCode != http.StatusOK {
		t.Errorf("another principal's call: %d, want 200", res.StatusCode)
	}
	unblock()
	for range 2 {
		if code := <-slow; code != http.StatusOK {
			t.Errorf("a slow call: %d, want 200", code)
		}
	}
	if res := call("agent-key", "fast.txt"); res.StatusCode != http.StatusOK {
		t.Errorf("a call once the others were answered: %d, want 200", res.StatusCode)
	}
}
