package approvals_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/deadline"
	"github.com/toolgate/toolgate/pending"
)

// TestSlowBodyIs408: behind the listener's body deadline, a decision whose
// body does not arrive in time is 408 on the page's form and on the API,
// and decides nothing.
func TestSlowBodyIs408(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-7", "write_note", `{"path":"notes/a.txt"}`)
	signer, err := approvals.NewSigner([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	h, err := approvals.New(approvals.Config{
		Store: e.store, Signer: signer, PublicURL: publicURL,
		Approvers: []approvals.Approver{{Name: "alice", Key: aliceKey}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(deadline.Body(h, 200*time.Millisecond))
	t.Cleanup(srv.Close)
	for _, req := range []string{
		"POST /approvals/" + c.ID + " HTTP/1.1\r\nHost: x\r\nOrigin: " + publicURL + "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ndecision=approve&",
		"POST /api/approvals/" + c.ID + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + aliceKey + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(conn, req)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil || res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("%s: %v %v, want 408", strings.Fields(req)[1], res, err)
		}
	}
	if got := e.state(c.ID); got != pending.Waiting {
		t.Fatalf("the call is %s, want still waiting", got)
	}
}
