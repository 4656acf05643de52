package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestConnectionCap: connections whose bodies never come fill the proxy
// listener up to limits.max_connections and no further. A new caller
// then waits (it is not answered, and toolgate holds nothing more for it)
// until one of them closes; the approvals listener keeps its own count and
// answers throughout.
func TestConnectionCap(t *testing.T) {
	const cap = 16
	tg, up := startCapped(t, cap)
	proxyAddr := strings.TrimPrefix(tg.proxy, "http://")

	// Headers, and a body that does not come: each holds a connection,
	// in use, until the body timeout (10 s).
	slow := stalledBodies(t, proxyAddr, cap)
	eventually(t, tg.admin, "toolgate_connections_open", cap, "listener", "proxy")

	// One more: the kernel completes its handshake, toolgate does not
	// accept it, so its request stays unanswered.
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "POST /tools/read_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key-0123456789\r\n" +
		"Content-Type: application/json\r\nContent-Length: 19\r\nConnection: close\r\n\r\n{\"path\":\"docs/a\"}  "
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	if line, err := rd.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection past the cap was answered: %q, %v", line, err)
	}

	// The approvals listener has its own count.
	res, err := http.Get(tg.approvals + "/approvals/no-such-call")
	if err != nil {
		t.Fatalf("the approvals listener, while the proxy's is full: %v", err)
	}
	res.Body.Close()

	// One slow connection goes; the waiting one is accepted and answered.
	slow[0].Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("after a slot freed: %q, %v; want 200", line, err)
	}
	if n := len(up.Requests()); n != 1 {
		t.Errorf("the upstream got %d calls, want 1", n)
	}
	if !strings.Contains(tg.stderr.String(), "listener near its connection cap") {
		t.Errorf("no warning logged at the cap:\n%s", tg.stderr.String())
	}
}

// startCapped runs a toolgate whose listeners take at most cap
// connections, in front of a recording upstream, with read_file allowed.
func startCapped(t *testing.T, cap int) (replica, *testkit.Upstream) {
	t.Helper()
	up := testkit.NewUpstream(t, nil)
	return startCappedBefore(t, cap, up.URL), up
}

// startCappedBefore is startCapped in front of the upstream at upURL.
func startCappedBefore(t *testing.T, cap int, upURL string) replica {
	t.Helper()
	return startLimited(t, "{max_connections: "+strconv.Itoa(cap)+"}", upURL)
}

// startLimited runs a toolgate with the given limits (a YAML map) in front
// of the upstream at upURL, with read_file allowed.
func startLimited(t *testing.T, limits, upURL string) replica {
	t.Helper()
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams: [{name: files, url: ` + upURL + `}]
identity: {api_keys: [{key: agent-key-0123456789, subject: agent}]}
policy: {rules_file: ./rules.yaml}
approvals: {secret: ` + testSecret + `}
limits: ` + limits + `
`,
		"rules.yaml": "rules:\n  - {id: r1, effect: allow, tool: read_file, target: \"*\"}\n",
	})
	return startReplica(t, filepath.Join(dir, "toolgate.yaml"))
}

// TestUnreadAnswer: an agent that never reads a large answer loses its
// connection once a write has waited writeProgress, and the upstream's
// connection is closed with it: neither is held for as long as the agent
// likes.
func TestUnreadAnswer(t *testing.T) {
	defer func(d time.Duration) { writeProgress = d }(writeProgress)
	writeProgress = 500 * time.Millisecond
	upstreamDone := make(chan error, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		var err error
		for i := 0; i < 1024 && err == nil; i++ { // 64 MiB
			_, err = w.Write(chunk)
		}
		upstreamDone <- err
	}))
	t.Cleanup(up.Close)
	tg := startCappedBefore(t, 64, up.URL)
	c, err := net.Dial("tcp", strings.TrimPrefix(tg.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(1024)
	if _, err := io.WriteString(c, "POST /tools/read_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key-0123456789\r\n"+
		"Content-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"path\":\"docs/a\"}"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-upstreamDone:
		if err == nil {
			t.Fatal("the upstream wrote 64 MiB to an agent that read none of it")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream is still writing to an agent that reads nothing")
	}
	settles(t, tg.admin, "toolgate_connections_open", 0, "listener", "proxy")
}

// keptConn is a raw keep-alive connection to the proxy listener.
type keptConn struct {
	net.Conn
	rd *bufio.Reader
}

// call sends one allowed call on the connection and reads its answer.
func (k keptConn) call(t *testing.T) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://x/tools/read_file", strings.NewReader(`{"path":"docs/a"}`))
	req.Header.Set("Authorization", "Bearer agent-key-0123456789")
	req.Header.Set("Content-Type", "application/json")
	if err := req.Write(k.Conn); err != nil {
		t.Fatal(err)
	}
	_ = k.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(k.rd, req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// TestConnectionShedding: idle keep-alive connections, authenticated or
// not, cannot keep a listener's places. Near the cap (90%) the listener
// closes its idle connections and answers with Connection: close; once
// the load is down (75%) keep-alives are back.
func TestConnectionShedding(t *testing.T) {
	const cap = 20 // sheds at 18, calm again at 15
	defer func(d time.Duration) { shedFor = d }(shedFor)
	shedFor = time.Second
	tg, _ := startCapped(t, cap)
	proxyAddr := strings.TrimPrefix(tg.proxy, "http://")
	dial := func() keptConn {
		t.Helper()
		c, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return keptConn{c, bufio.NewReader(c)}
	}
	idle := make([]keptConn, 17)
	for i := range idle {
		idle[i] = dial()
		if res := idle[i].call(t); res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("call %d: %d, close %v; want 200 kept alive", i, res.StatusCode, res.Close)
		}
	}
	eventually(t, tg.admin, "toolgate_connections_open", 17, "listener", "proxy")
	eventually(t, tg.admin, "toolgate_connections_shed_total", 0, "listener", "proxy")

	// The 18th: the idle ones are closed, and its answer closes it too.
	last := dial()
	if res := last.call(t); res.StatusCode != http.StatusOK || !res.Close {
		t.Fatalf("the call past 90%%: %d, close %v; want 200 and Connection: close", res.StatusCode, res.Close)
	}
	for i, k := range idle {
		_ = k.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := k.rd.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection %d: %v, want closed by toolgate", i, err)
		}
	}
	eventually(t, tg.admin, "toolgate_connections_shed_total", 1, "listener", "proxy")
	settles(t, tg.admin, "toolgate_connections_open", 0, "listener", "proxy")
	if !strings.Contains(tg.stderr.String(), "listener near its connection cap") {
		t.Errorf("no warning logged:\n%s", tg.stderr.String())
	}

	// Within shedFor, even with the load down, answers close their
	// connections: the places do not go straight back to idle ones.
	if res := dial().call(t); !res.Close {
		t.Fatal("a call while shedding was kept alive")
	}
	// After it keep-alives are back, with no connection closing to ask
	// for them.
	time.Sleep(shedFor + 200*time.Millisecond)
	if res := dial().call(t); res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("a call after the load fell: %d, close %v; want 200 kept alive", res.StatusCode, res.Close)
	}
}

// stalledBodies opens n connections to addr that each send a call's
// headers and one byte of its body: in use, until the body timeout.
func stalledBodies(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "POST /tools/read_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key-0123456789\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns
}

// TestConnectionReaping: while a listener sheds, a connection it accepts
// that sends no request's headers within a second is closed, so that a
// flood of such connections cannot keep the places (and agents waiting
// behind them) for the header timeout; connections in use stay.
func TestConnectionReaping(t *testing.T) {
	const cap = 20 // sheds at 18
	tg, _ := startCapped(t, cap)
	proxyAddr := strings.TrimPrefix(tg.proxy, "http://")
	busy := stalledBodies(t, proxyAddr, 18)
	eventually(t, tg.admin, "toolgate_connections_shed_total", 1, "listener", "proxy")
	silent := make([]net.Conn, 2)
	for i := range silent {
		c, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent[i] = c
	}
	start := time.Now()
	for i, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("silent connection %d: %v, want closed by toolgate", i, err)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("silent connections closed after %v, want within about %v", took, headerGrace)
	}
	// The connections in use are still there.
	_ = busy[0].SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := busy[0].Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection in use: %v, want it still open and unanswered", err)
	}
}

// TestAdminProbesAnswerPastUnsentBodies: a probe that announces a body and
// never sends it is answered at once and its connection closed, so that
// the admin listener's cap of such connections, opened without
// credentials, does not keep /livez from answering (net/http drains an
// unread body before it answers, and the admin port had no deadline).
func TestAdminProbesAnswerPastUnsentBodies(t *testing.T) {
	const cap = 16
	tg, _ := startCapped(t, cap)
	addr := strings.TrimPrefix(tg.admin, "http://")
	for range cap {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		r := bufio.NewReader(c)
		res, err := http.ReadResponse(r, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("a probe with a body it never sends: %v %v, want 200 at once", res, err)
		}
		if _, err := io.ReadAll(r); err != nil {
			t.Fatalf("its connection was held open: %v", err)
		}
	}
	client := &http.Client{Timeout: 3 * time.Second}
	res, err := client.Get(tg.admin + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
}
