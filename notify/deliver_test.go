package notify

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/direct"
	"github.com/toolgate/toolgate/internal/testkit"
)

func TestRetries(t *testing.T) {
	tests := []struct {
		name  string
		codes []int
		max   int // MaxAttempts; 0: default
		want  []string
		reqs  int
	}{
		{"503 twice then 200", []int{503, 503}, 0, []string{"retry", "retry", "delivered"}, 3},
		{"408", []int{408}, 0, []string{"retry", "delivered"}, 2},
		{"409", []int{409}, 0, []string{"retry", "delivered"}, 2},
		{"425", []int{425}, 0, []string{"retry", "delivered"}, 2},
		{"429 without Retry-After", []int{429}, 0, []string{"retry", "delivered"}, 2},
		{"500", []int{500}, 0, []string{"retry", "delivered"}, 2},
		{"204 is delivered", []int{204}, 0, []string{"delivered"}, 1},
		{"400 is permanent", []int{400}, 0, []string{"failed"}, 1},
		{"401 is permanent", []int{401}, 0, []string{"failed"}, 1},
		{"404 is permanent", []int{404}, 0, []string{"failed"}, 1},
		{"410 is permanent", []int{410}, 0, []string{"failed"}, 1},
		{"attempts used up", []int{500, 500, 500, 500}, 3, []string{"retry", "retry", "failed"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewUpstream(t, statuses(tt.codes...))
			var res results
			opts := fast(&res, Target{URL: rc.URL})
			opts.MaxAttempts = tt.max
			n := start(t, opts)
			n.Notify(requested("c1"))
			testkit.WaitFor(t, "a final result", func() bool { return res.final(1) })
			if diff := cmp.Diff(tt.want, res.get()); diff != "" {
				t.Errorf("OnDelivery results (-want +got):\n%s", diff)
			}
			if got := len(rc.Requests()); got != tt.reqs {
				t.Errorf("receiver saw %d requests, want %d", got, tt.reqs)
			}
		})
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel() // it waits a second
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			rc := testkit.NewUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 0 {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(code)
				}
			})
			var res results
			n := start(t, fast(&res, Target{URL: rc.URL})) // BaseBackoff 1ms: only Retry-After explains a long wait
			n.Notify(requested("c1"))
			testkit.WaitFor(t, "delivery", func() bool { return res.final(1) })
			if diff := cmp.Diff([]string{"retry", "delivered"}, res.get()); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			reqs := rc.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
				t.Errorf("retried after %v, want ≥ 1s (Retry-After: 1)", gap)
			}
		})
	}
}

func TestRetryAfterBeyondMaxElapsedFails(t *testing.T) {
	rc := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL}))
	began := time.Now()
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "failure", func() bool { return res.final(1) })
	if diff := cmp.Diff([]string{"failed"}, res.get()); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("took %v: a wait past MaxElapsed should fail at once", d)
	}
}

func TestMaxElapsed(t *testing.T) {
	tests := []struct {
		name string
		rc   func(*testing.T) *testkit.Upstream
	}{
		{"always 503", func(t *testing.T) *testkit.Upstream {
			return testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) })
		}},
		{"receiver hangs", hangingReceiver},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := tt.rc(t)
			var res results
			opts := fast(&res, Target{URL: rc.URL})
			opts.MaxAttempts = 1000
			opts.BaseBackoff = 10 * time.Millisecond
			opts.MaxElapsed = 150 * time.Millisecond
			n := start(t, opts)
			began := time.Now()
			n.Notify(requested("c1"))
			testkit.WaitFor(t, "failure", func() bool { return res.final(1) })
			elapsed := time.Since(began)
			got := res.get()
			if got[len(got)-1] != ResultFailed || res.count(ResultDelivered) != 0 {
				t.Errorf("results = %v, want retries ending in failed", got)
			}
			if elapsed > time.Second {
				t.Errorf("gave up after %v, want about MaxElapsed (150ms)", elapsed)
			}
		})
	}
}

func TestNetworkErrorIsRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	var res results
	opts := fast(&res, Target{URL: "http://" + addr + "/hook"})
	opts.MaxAttempts = 2
	n := start(t, opts)
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "failure", func() bool { return res.final(1) })
	if diff := cmp.Diff([]string{"retry", "failed"}, res.get()); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestRedirects(t *testing.T) {
	other := testkit.NewUpstream(t, nil)
	tests := []struct {
		name  string
		to    func(self string) string
		code  int
		want  string
		other int // requests the other host must see
	}{
		{"307 on the same host is followed", func(self string) string { return self + "/moved" }, 307, ResultDelivered, 0},
		{"302 would turn POST into GET", func(self string) string { return self + "/moved" }, 302, ResultFailed, 0},
		{"307 to another host is not followed", func(string) string { return other.URL }, 307, ResultFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/moved" {
					if r.Method != http.MethodPost {
						w.WriteHeader(http.StatusMethodNotAllowed)
					}
					return
				}
				http.Redirect(w, r, tt.to(srv.URL), tt.code)
			}))
			t.Cleanup(srv.Close)
			var res results
			n := start(t, fast(&res, Target{URL: srv.URL}))
			n.Notify(requested("c1"))
			testkit.WaitFor(t, "a final result", func() bool { return res.final(1) })
			if diff := cmp.Diff([]string{tt.want}, res.get()); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if got := len(other.Requests()); got != tt.other {
				t.Errorf("other host saw %d requests, want %d", got, tt.other)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", -1},
		{"1", time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-5", -1},
		{"soon", -1},
		{"99999999999999999999999", 24 * time.Hour},
		{"999999999", 24 * time.Hour},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	n := &Notifier{opts: Options{BaseBackoff: 100 * time.Millisecond}}
	for attempt := 1; attempt <= 80; attempt++ {
		ceiling := time.Minute
		if attempt < 11 {
			ceiling = min(100*time.Millisecond<<(attempt-1), time.Minute)
		}
		for range 20 {
			if d := n.backoff(attempt); d < 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", attempt, d, ceiling)
			}
		}
	}
}

// TestTimeoutBoundsAttempt: with the Notifier's own client, an attempt at
// a receiver that never answers ends after Timeout and is retried, long
// before MaxElapsed.
func TestTimeoutBoundsAttempt(t *testing.T) {
	rc := hangingReceiver(t)
	var res results
	opts := fast(&res, Target{URL: rc.URL})
	opts.Timeout = 100 * time.Millisecond
	opts.MaxAttempts = 2
	opts.MaxElapsed = time.Minute
	n := start(t, opts)
	began := time.Now()
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "failure", func() bool { return res.final(1) })
	if diff := cmp.Diff([]string{"retry", "failed"}, res.get()); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("two attempts took %v, want about 2 × Timeout (100ms)", d)
	}
}

// countingReceiver answers every event 204 and counts its connections
// that reach state; idle is its keep-alive timeout (0: none).
func countingReceiver(t *testing.T, state http.ConnState, idle time.Duration) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.IdleTimeout = idle
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == state {
			n.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestPlainReceiverConnections: events sent one after another to a
// plain-HTTP receiver share one connection, and one the receiver closed
// while it sat idle (its keep-alive timeout) is found closed before use:
// the next event goes out on a new connection, with no attempt failed.
func TestPlainReceiverConnections(t *testing.T) {
	srv, conns := countingReceiver(t, http.StateNew, 100*time.Millisecond)
	var res results
	n := start(t, fast(&res, Target{URL: srv.URL + "/hook", Lanes: 1}))
	send := func(id string, want int) {
		n.Notify(requested(id))
		testkit.WaitFor(t, "delivery of "+id, func() bool { return res.count(ResultDelivered) == want })
	}
	for i := range 3 {
		send("c"+strconv.Itoa(i), i+1)
	}
	if c := conns.Load(); c != 1 {
		t.Errorf("3 events in turn opened %d connections, want 1", c)
	}
	time.Sleep(300 * time.Millisecond) // the receiver closes the idle connection
	send("c3", 4)
	if c := conns.Load(); c != 2 {
		t.Errorf("after the receiver closed the idle connection: %d connections, want 2", c)
	}
	if r := res.count(ResultRetry); r != 0 {
		t.Errorf("%d attempts failed, want none: the closed connection was used", r)
	}
}

// TestPlainReceiverGoesDirect: the Notifier's own client sends a
// plain-HTTP receiver's events on connections of its own: net/http's
// Transport dials nothing for them.
func TestPlainReceiverGoesDirect(t *testing.T) {
	rc := testkit.NewUpstream(t, statuses(204, 204))
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL + "/hook", Lanes: 1}))
	var dials atomic.Int64
	fallback := n.client.Transport.(*direct.Hosts).Fallback()
	dial := fallback.DialContext
	fallback.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	n.Notify(requested("c1"))
	n.Notify(requested("c2"))
	testkit.WaitFor(t, "delivery", func() bool { return res.final(2) })
	if res.count(ResultDelivered) != 2 {
		t.Fatalf("results %v, want two delivered", res.get())
	}
	if d := dials.Load(); d != 0 {
		t.Errorf("net/http's Transport dialled %d times for a plain-HTTP receiver, want 0", d)
	}
}

// TestTimeoutBoundsSlowBody: a receiver that sends its answer's head at
// once and then its body a byte at a time does not hold the lane past
// Timeout either: the attempt's bound covers the whole answer.
func TestTimeoutBoundsSlowBody(t *testing.T) {
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
			for {
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	})
	var res results
	opts := fast(&res, Target{URL: "http://" + addr + "/hook", Lanes: 1})
	opts.Timeout = 200 * time.Millisecond
	opts.MaxElapsed = time.Minute
	n := start(t, opts)
	began := time.Now()
	n.Notify(requested("c1"))
	n.Notify(requested("c2"))
	testkit.WaitFor(t, "both events", func() bool { return res.final(2) })
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("two events at a receiver dripping its answer took %v, want about 2 × Timeout (200ms)", d)
	}
}

// TestDefaultTransportProxyKept: a program that sets a proxy on
// http.DefaultTransport in code, rather than in the environment, has its
// plain-HTTP receivers' events go through that proxy, as before they
// went on connections of the Notifier's own.
func TestDefaultTransportProxyKept(t *testing.T) {
	proxy := testkit.NewUpstream(t, statuses(204))
	pu, _ := url.Parse(proxy.URL)
	old := http.DefaultTransport
	dt := old.(*http.Transport).Clone()
	dt.Proxy = http.ProxyURL(pu)
	http.DefaultTransport = dt
	t.Cleanup(func() { http.DefaultTransport = old })

	rc := testkit.NewUpstream(t, statuses(204))
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL + "/hook"}))
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "delivery", func() bool { return res.final(1) })
	if p, r := len(proxy.Requests()), len(rc.Requests()); p != 1 || r != 0 {
		t.Errorf("%d events through the proxy, %d straight to the receiver; want 1 and 0", p, r)
	}
}

// TestCloseReleasesPlainConnections: Close closes the connections the
// Notifier keeps to a plain-HTTP receiver.
func TestCloseReleasesPlainConnections(t *testing.T) {
	srv, closed := countingReceiver(t, http.StateClosed, 0)
	var res results
	n := start(t, fast(&res, Target{URL: srv.URL + "/hook", Lanes: 1}))
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "delivery", func() bool { return res.final(1) })
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the receiver's connection closed", func() bool { return closed.Load() == 1 })
}

// TestDefaultTimeout: without Options.Timeout an attempt with the
// Notifier's own client is bounded by DefaultTimeout, as the client's
// Timeout bounded it before.
func TestDefaultTimeout(t *testing.T) {
	var res results
	n := start(t, fast(&res, Target{URL: "http://127.0.0.1:1/hook"}))
	if n.timeout != DefaultTimeout {
		t.Errorf("an attempt's bound is %v, want %v", n.timeout, DefaultTimeout)
	}
}
