package main

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestConnectionsPerSource: with limits.max_connections_per_source, one
// host holding its share of the proxy listener's connections has its next
// connection closed at once, without an answer and without taking one of
// the listener's places, while another host's calls are answered; once
// one of the first host's connections closes, it may open another.
func TestConnectionsPerSource(t *testing.T) {
	loopbackAlias(t, "127.0.0.2")
	up := testkit.NewUpstream(t, nil)
	tg := startLimited(t, "{max_connections: 16, max_connections_per_source: 4}", up.URL)
	proxyAddr := strings.TrimPrefix(tg.proxy, "http://")

	// 127.0.0.1 holds its four: headers, and a body that does not come.
	slow := stalledBodies(t, proxyAddr, 4)
	eventually(t, tg.admin, "toolgate_connections_open", 4, "listener", "proxy")

	// Its fifth is closed unanswered, at once: not left waiting, as at the
	// listener's cap.
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /tools/read_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key-0123456789\r\n"+
		"Content-Type: application/json\r\nContent-Length: 17\r\nConnection: close\r\n\r\n{\"path\":\"docs/a\"}")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a fifth connection from one source: %q, %v; want it closed at once", line, err)
	}
	eventually(t, tg.admin, "toolgate_connections_refused_total", 1, "listener", "proxy")

	// Another host (127.0.0.2 is loopback too) is answered meanwhile.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)},
	}).DialContext}}
	if code := readFile(t, other, tg.proxy); code != http.StatusOK {
		t.Fatalf("another source's call: %d, want 200", code)
	}

	// One of the first host's connections goes; it may open another.
	slow[0].Close()
	settles(t, tg.admin, "toolgate_connections_open", 3, "listener", "proxy")
	if code := readFile(t, http.DefaultClient, tg.proxy); code != http.StatusOK {
		t.Fatalf("after one of its connections closed: %d, want 200", code)
	}
	if n := len(up.Requests()); n != 2 {
		t.Errorf("the upstream got %d calls, want 2", n)
	}
	if !strings.Contains(tg.stderr.String(), "max_connections_per_source") {
		t.Errorf("no warning logged at the cap per source:\n%s", tg.stderr.String())
	}

	// The approvals listener has no cap per source: approvers often come
	// through one ingress. Five connections from one host, all answered.
	for i := range 5 {
		c, err := net.Dial("tcp", strings.TrimPrefix(tg.approvals, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /approvals/no-such-call HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 ") {
			t.Fatalf("approvals connection %d from one host: %q, %v; want an answer", i+1, line, err)
		}
	}
}

// TestAdminConnectionsPerSource: one host holds at most 16 of the admin
// listener's 64 places, with or without limits.max_connections_per_source:
// connections that send their headers a line at a time from one pod no
// longer make the kubelet's probes wait behind them in the backlog.
func TestAdminConnectionsPerSource(t *testing.T) {
	loopbackAlias(t, "127.0.0.2")
	up := testkit.NewUpstream(t, nil)
	tg := startLimited(t, "{max_connections: 1000}", up.URL)
	adminAddr := strings.TrimPrefix(tg.admin, "http://")
	for range adminMaxPerSource {
		c, err := net.Dial("tcp", adminAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: x\r\n") // and the rest never
	}
	c, err := net.Dial("tcp", adminAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection %d from one source to the admin listener: %q, %v; want it closed at once", adminMaxPerSource+1, line, err)
	}
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)},
	}).DialContext}}
	res, err := probe.Get(tg.admin + "/livez")
	if err != nil {
		t.Fatalf("a probe from another source: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("a probe from another source: %d, want 200", res.StatusCode)
	}
}

// loopbackAlias skips the test where ip, a loopback address other than
// 127.0.0.1, cannot be a connection's source (Linux routes all of
// 127.0.0.0/8 to loopback; other systems need an alias).
func loopbackAlias(t *testing.T, ip string) {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("%s is not a loopback address here: %v", ip, err)
	}
	ln.Close()
}

// readFile sends an allowed call through the proxy at base and returns its
// status.
func readFile(t *testing.T, c *http.Client, base string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/tools/read_file", strings.NewReader(`{"path":"docs/a"}`))
	req.Header.Set("Authorization", "Bearer agent-key-0123456789")
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// TestSourceListener: the count per source follows the connections, a
// connection closed twice gives its place back once, and a source is the
// peer's address.
func TestSourceListener(t *testing.T) {
	loopbackAlias(t, "127.0.0.3")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	sl := newSourceListener(ln, "proxy", 2, slog.New(slog.DiscardHandler), refused)
	defer sl.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	next := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no connection accepted")
			return nil
		}
	}
	closedAtOnce := func(c net.Conn) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection past the share: %v, want it closed", err)
		}
	}

	dial("127.0.0.1")
	dial("127.0.0.1")
	a, b := next(), next()
	closedAtOnce(dial("127.0.0.1"))
	var m dto.Metric
	if err := refused.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("refused %v (%v), want 1", m.GetCounter().GetValue(), err)
	}
	dial("127.0.0.3")
	next()

	// Closed twice (net/http and the listener's cap may both close it),
	// given back once: one place again, not two.
	_ = a.Close()
	_ = a.Close()
	dial("127.0.0.1")
	next()
	closedAtOnce(dial("127.0.0.1"))
	_ = b.Close()

	sl.mu.Lock()
	held := map[string]int{}
	for src, n := range sl.open {
		held[src.String()] = n
	}
	sl.mu.Unlock()
	if held["127.0.0.1"] != 1 || held["127.0.0.3"] != 1 || len(held) != 2 {
		t.Errorf("held per source %v, want 127.0.0.1 and 127.0.0.3 one each", held)
	}

	for addr, want := range map[string]string{
		"[2001:db8:1:2:3:4:5:6]:1": "2001:db8:1:2:3:4:5:6",
		"[fe80::1%eth0]:1":         "fe80::1%eth0",
		"[::ffff:10.0.0.1]:1":      "10.0.0.1",
		"10.0.0.1:1":               "10.0.0.1",
	} {
		ta, _ := net.ResolveTCPAddr("tcp", addr)
		if got, ok := sourceOf(ta); !ok || got.String() != want {
			t.Errorf("sourceOf(%s) = %v, %v; want %s", addr, got, ok, want)
		}
	}
}
