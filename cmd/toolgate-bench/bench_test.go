package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestBodies: every call the harness sends is a 200-byte JSON object, the
// ask calls included (their counter keeps the size fixed).
func TestBodies(t *testing.T) {
	for name, b := range map[string]string{
		"read": readBody, "delete": deleteBody, "mcp": mcpBody,
		"ask 1":   fmt.Sprintf(askTemplate, "abcdefghijkl", 1),
		"ask max": fmt.Sprintf(askTemplate, "abcdefghijkl", 9999999999),
	} {
		var v map[string]any
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Errorf("%s: %v: %s", name, err, b)
		}
		if len(b) != bodySize {
			t.Errorf("%s: %d bytes, want %d", name, len(b), bodySize)
		}
	}
}

// TestProcReadings reads this test's own process: its CPU from /proc
// agrees with getrusage, RSS is there, and a command name with spaces and
// parentheses does not shift the fields.
func TestProcReadings(t *testing.T) {
	pid := os.Getpid()
	c0, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	r0 := rusage(t)
	for rusage(t)-r0 < 200*time.Millisecond { // spin: 200 ms of CPU whatever else runs
	}
	r1 := rusage(t)
	c1, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in 10 ms ticks, sampled independently of getrusage.
	if d, want := c1-c0, r1-r0; d < want-30*time.Millisecond || d > want+100*time.Millisecond {
		t.Errorf("/proc says %v of CPU, getrusage %v", d, want)
	}
	if kib, err := rssKiB(pid); err != nil || kib <= 0 {
		t.Errorf("rss %d KiB, %v", kib, err)
	}
	f := statFields("1234 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12")
	if len(f) != 13 || f[0] != "S" || f[11] != "11" {
		t.Errorf("fields %q", f)
	}
	if exited(pid) {
		t.Error("this process counts as exited")
	}
}

// TestVerdict: a run only counts when every answer and the upstream's
// count are what the target promises.
func TestVerdict(t *testing.T) {
	allow := &target{expect: 200, reaches: true}
	deny := &target{expect: 403}
	for _, c := range []struct {
		name    string
		t       *target
		w       wrkResult
		reached int64
		ok      bool
	}{
		{"allow ok", allow, wrkResult{Requests: 100}, 100, true},
		{"allow, more reached than answered", allow, wrkResult{Requests: 100}, 103, true},
		{"allow, some not 200", allow, wrkResult{Requests: 100, Status: 1}, 100, false},
		{"allow, upstream missed calls", allow, wrkResult{Requests: 100}, 99, false},
		{"allow, socket errors", allow, wrkResult{Requests: 100, Read: 1}, 100, false},
		{"nothing answered", allow, wrkResult{}, 0, false},
		{"deny ok", deny, wrkResult{Requests: 100, Status: 100}, 0, true},
		{"deny, one 200", deny, wrkResult{Requests: 100, Status: 99}, 0, false},
		{"deny reached the upstream", deny, wrkResult{Requests: 100, Status: 100}, 1, false},
	} {
		if got := verdict(c.t, &c.w, c.reached); (got == "") != c.ok {
			t.Errorf("%s: verdict %q, want ok=%v", c.name, got, c.ok)
		}
	}
}

func rusage(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestPercentile(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 1000; i++ {
		xs = append(xs, time.Duration(i))
	}
	if p50, p99 := percentile(xs, 50), percentile(xs, 99); p50 != 500 || p99 != 990 {
		t.Errorf("p50 %d p99 %d, want 500 990", p50, p99)
	}
	if median([]float64{3, 1, 2}) != 2 || median([]float64{4, 1, 3, 2}) != 2.5 {
		t.Error("median")
	}
}

// TestMCPBodies: every -mcp call is an mcpBodySize-byte JSON-RPC message
// whatever its id.
func TestMCPBodies(t *testing.T) {
	for _, tmpl := range []string{mcpSessionTemplate, mcpStatelessTemplate} {
		for _, id := range []int{1, 9999999999} {
			b := fmt.Sprintf(tmpl, id)
			var v struct{ ID int }
			if err := json.Unmarshal([]byte(b), &v); err != nil || v.ID != id {
				t.Errorf("id %d: %v: %s", id, err, b)
			}
			if len(b) != mcpBodySize {
				t.Errorf("%d bytes, want %d: %s", len(b), mcpBodySize, b)
			}
		}
	}
}

// TestMCPServer drives the MCP server as the load does, in every mode:
// sessions open and close, and each call runs the tool once.
func TestMCPServer(t *testing.T) {
	var count atomic.Int64
	srv := httptest.NewServer(mcpHandler(&count))
	defer srv.Close()
	s := &stack{agentKey: "k"}
	for _, m := range mcpModes {
		tg := &target{name: m.name, url: srv.URL + "/" + m.name + "/mcp", mode: &m}
		before := count.Load()
		if err := s.checkMCP(t.Context(), tg); err != nil {
			t.Fatal(err)
		}
		if n := count.Load() - before; n != 1 {
			t.Errorf("%s: the tool ran %d times, want 1", m.name, n)
		}
		ids, err := openSessions(t.Context(), tg, s.agentKey, 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 2}[m.stateless()]; len(ids) != want {
			t.Errorf("%s: %d sessions, want %d", m.name, len(ids), want)
		}
		closeSessions(tg, s.agentKey, ids)
		for _, id := range ids {
			status, _, b, err := mcpPost(t.Context(), tg, s.agentKey, id, fmt.Sprintf(tg.idTemplate(), 2))
			if err != nil || status != http.StatusNotFound {
				t.Errorf("%s: a call in a closed session: %d %v %s", m.name, status, err, b)
			}
		}
	}
}

// TestFreePortsDistinct: the ports handed to the servers of one stack are
// never the same twice.
func TestFreePortsDistinct(t *testing.T) {
	addrs, err := freePorts(200)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("port %s handed out twice", a)
		}
		seen[a] = true
	}
	named, err := namedPorts("a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(named) != 2 || named["a"] == "" || named["a"] == named["b"] {
		t.Fatalf("namedPorts = %v", named)
	}
}

// TestEOFAfterClose: a proxied body that net/http closed reads as ended,
// not as an error that would tear down the upstream connection.
func TestEOFAfterClose(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("abc"))
	b := eofAfterClose{req.Body}
	if got, err := io.ReadAll(io.LimitReader(b, 3)); err != nil || string(got) != "abc" {
		t.Fatalf("read %q, %v", got, err)
	}
	closed := eofAfterClose{closedBody{}}
	if n, err := closed.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Read after close = %d, %v; want 0, io.EOF", n, err)
	}
}

type closedBody struct{}

func (closedBody) Read([]byte) (int, error) { return 0, http.ErrBodyReadAfterClose }
func (closedBody) Close() error             { return nil }
