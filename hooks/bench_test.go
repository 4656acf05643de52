package hooks

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"
)

// newLocalHook starts a hook on loopback that allows every call, and a
// Runner asking it.
func newLocalHook(tb testing.TB) *Runner {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decision":"allow","reason":"no freeze"}`)
	}))
	tb.Cleanup(srv.Close)
	r, err := New(Options{
		Hooks:  []Hook{{Name: "local", URL: srv.URL, Tool: "deploy_*", Secret: "whsec_c2VjcmV0LWtleS1ieXRlcw=="}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r
}

// BenchmarkRunLocalHook is the latency one signed hook on loopback adds to
// a call: request, signature, response and strict parse.
func BenchmarkRunLocalHook(b *testing.B) {
	r := newLocalHook(b)
	input := []byte(testInput)
	b.ReportAllocs()
	for b.Loop() {
		if v := r.Run(b.Context(), "key:agent", "ci", "deploy_prod", true, input); v.Decision != Allow {
			b.Fatalf("Decision = %q (%+v)", v.Decision, v.Reasons)
		}
	}
}

// TestLocalHookLatency prints the p50 and p99 of 2,000 runs against a local
// hook. It runs only with TOOLGATE_HOOK_LATENCY=1: it measures, it does
// not judge.
func TestLocalHookLatency(t *testing.T) {
	if os.Getenv("TOOLGATE_HOOK_LATENCY") != "1" {
		t.Skip("set TOOLGATE_HOOK_LATENCY=1 to measure")
	}
	r := newLocalHook(t)
	input := []byte(testInput)
	for range 100 { // warm the connection pool
		r.Run(t.Context(), "key:agent", "ci", "deploy_prod", true, input)
	}
	const n = 2000
	took := make([]time.Duration, n)
	for i := range took {
		start := time.Now()
		v := r.Run(t.Context(), "key:agent", "ci", "deploy_prod", true, input)
		took[i] = time.Since(start)
		if v.Decision != Allow {
			t.Fatalf("Decision = %q (%+v)", v.Decision, v.Reasons)
		}
	}
	slices.Sort(took)
	t.Logf("one local hook, %d runs: p50 %v, p99 %v, max %v", n, took[n/2], took[n*99/100], took[n-1])
}
