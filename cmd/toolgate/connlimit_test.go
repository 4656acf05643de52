package main

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestConnectionCap: connections that never finish their headers fill the
// proxy listener up to limits.max_connections and no further. A new caller
// then waits (it is not answered, and toolgate holds nothing more for it)
// until one of them closes; the approvals listener keeps its own count and
// answers throughout.
func TestConnectionCap(t *testing.T) {
	const cap = 16
	up := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams: [{name: files, url: ` + up.URL + `}]
identity: {api_keys: [{key: agent-key-0123456789, subject: agent}]}
policy: {rules_file: ./rules.yaml}
approvals: {secret: ` + testSecret + `}
limits: {max_connections: 16}
`,
		"rules.yaml": "rules:\n  - {id: r1, effect: allow, tool: read_file, target: \"*\"}\n",
	})
	tg := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	proxyAddr := strings.TrimPrefix(tg.proxy, "http://")

	// Half a request line and no headers: each holds a connection until
	// ReadHeaderTimeout (10 s).
	slow := make([]net.Conn, cap)
	for i := range slow {
		c, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("POST /tools/read_file HTTP/1.1\r\nHost: x\r\nX-Pad: ")); err != nil {
			t.Fatal(err)
		}
		slow[i] = c
	}
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
	if !strings.Contains(tg.stderr.String(), "listener at its connection cap") {
		t.Errorf("no warning logged at the cap:\n%s", tg.stderr.String())
	}
}
