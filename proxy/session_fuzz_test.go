package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// fuzzSessionAgents are the callers of FuzzMCPSession: three API keys and
// no credentials (anonymous).
var fuzzSessionAgents = []struct{ key, subject string }{
	{"fuzz-key-0", "agent-0"},
	{"fuzz-key-1", "agent-1"},
	{"fuzz-key-2", "agent-2"},
	{"", identity.AnonymousID},
}

// fuzzSessionUpstream is an MCP server that hands out the session ID it
// is told to on initialize, remembers whom it first handed each one to
// (by X-Toolgate-Subject) until its owner ends it (DELETE), and records
// every request that reaches it in a session that is not its caller's.
type fuzzSessionUpstream struct {
	mu      sync.Mutex
	next    string            // the session ID the next initialize hands out
	issued  map[string]string // session ID -> the subject it was first handed to
	foreign []string          // requests seen in another's session
	seen    int
}

func (u *fuzzSessionUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen++
	subject := r.Header.Get("X-Toolgate-Subject")
	sessions := r.Header.Values("Mcp-Session-Id")
	for _, s := range sessions {
		if owner, ok := u.issued[s]; !ok || owner != subject {
			u.foreign = append(u.foreign, r.Method+" by "+subject+" in session "+strconv.Quote(s)+" of "+strconv.Quote(owner))
		} else if r.Method == http.MethodDelete {
			delete(u.issued, s) // ended: the ID may be handed out anew
		}
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &msg)
	if r.Method == http.MethodPost && msg.Method == "initialize" && len(sessions) == 0 {
		if _, ok := u.issued[u.next]; !ok {
			u.issued[u.next] = subject
		}
		w.Header()["Mcp-Session-Id"] = []string{u.next}
	}
	if r.Method != http.MethodPost || len(msg.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{}}`)
}

// newFuzzSessionProxy is a toolgate with a memory store in front of a
// fresh fuzzSessionUpstream.
func newFuzzSessionProxy(t *testing.T) (http.Handler, *fuzzSessionUpstream) {
	up := &fuzzSessionUpstream{issued: map[string]string{}}
	u, err := url.Parse("http://upstream.test")
	if err != nil {
		t.Fatal(err)
	}
	var keys []identity.APIKey
	for _, a := range fuzzSessionAgents {
		if a.key != "" {
			keys = append(keys, identity.APIKey{Key: a.key, Subject: a.subject})
		}
	}
	auth, err := identity.New(identity.Config{APIKeys: keys, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{
		Upstreams: []Upstream{{
			Name: "tools", URL: u, Prefix: "/", Protocol: policy.KindMCP, MCPPath: "/mcp",
			Transport: fuzzWire{up},
		}},
		Decider:      allowAll,
		Auth:         auth,
		MaxBodyBytes: 4 << 10,
		Pending:      pending.NewMemory(pending.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler(), up
}

// FuzzMCPSession runs a script of MCP requests by four callers through
// toolgate: initialize (the upstream hands out a fresh session ID or one
// the fuzzer picked, possibly one it already handed to someone else), and
// POST, GET and DELETE carrying a session ID (one handed out, or one the
// fuzzer picked, possibly several). No request in a session that is not
// its caller's may reach the upstream; every such request is answered
// 404; the owner's own requests go through, until it ends the session
// (a DELETE the upstream answers 2xx: then the session is no one's); and
// no caller is handed a session that is someone else's.
//
// ops is read two bytes at a time: the first picks the caller (low two
// bits) and the request (next two); the second picks the session, even
// from those handed out, odd from ids (lines; several values for one
// header with "\r").
func FuzzMCPSession(f *testing.F) {
	f.Add([]byte{0x00, 0x00, 0x05, 0x00, 0x09, 0x00, 0x0d, 0x00}, "x")         // agent-1 in agent-0's session: POST, GET, DELETE
	f.Add([]byte{0x00, 0x00, 0x04, 0x00, 0x08, 0x00, 0x0c, 0x00}, "x")         // agent-0 in its own session
	f.Add([]byte{0x00, 0x01, 0x01, 0x01, 0x07, 0x00, 0x06, 0x02}, "dup")       // two callers handed the same ID
	f.Add([]byte{0x03, 0x00, 0x07, 0x00, 0x04, 0x00}, "x")                     // anonymous's session, used by agent-0
	f.Add([]byte{0x04, 0x01, 0x09, 0x03, 0x0e, 0x05}, "unknown\nbad id\nx\ry") // sessions never handed out
	f.Add([]byte{0x00, 0x00, 0x01, 0x00, 0x05, 0x02, 0x06, 0x01}, "a\rb")
	f.Add([]byte{0x00, 0x00, 0x01, 0x00, 0x04, 0x01}, "fresh-1\rfresh-2") // agent-0's session and agent-1's in one request
	f.Fuzz(func(t *testing.T, ops []byte, ids string) {
		if len(ops) > 64 || len(ids) > 512 {
			return
		}
		handler, up := newFuzzSessionProxy(t)
		candidates := strings.Split(ids, "\n")
		var handed []string          // sessions handed to a caller, in order
		owner := map[string]string{} // session -> the subject it was handed to
		fresh := 0
		for i := 0; i+1 < len(ops); i += 2 {
			agent := fuzzSessionAgents[ops[i]&3]
			kind, pick := (ops[i]>>2)&3, ops[i+1]
			var sessions []string
			if kind != 0 {
				if pick%2 == 0 && len(handed) > 0 {
					sessions = []string{handed[int(pick/2)%len(handed)]}
				} else {
					vals, ok := fuzzMCPHeader(strings.ReplaceAll(candidates[int(pick/2)%len(candidates)], "\r", "\n"))
					if !ok || len(vals) == 0 {
						continue
					}
					sessions = vals
				}
			}
			method, body := http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`
			switch kind {
			case 0:
				body = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`
				up.mu.Lock()
				if pick%2 == 0 {
					fresh++
					up.next = "fresh-" + strconv.Itoa(fresh)
				} else {
					up.next = candidates[int(pick/2)%len(candidates)]
				}
				up.mu.Unlock()
			case 2:
				method, body = http.MethodGet, ""
			case 3:
				method, body = http.MethodDelete, ""
			}
			req := httptest.NewRequest(method, "http://toolgate.test/mcp", strings.NewReader(body))
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("Accept", "application/json, text/event-stream")
			if agent.key != "" {
				req.Header.Set("Authorization", "Bearer "+agent.key)
			}
			if sessions != nil {
				req.Header["Mcp-Session-Id"] = sessions
			}
			up.mu.Lock()
			seenBefore := up.seen
			up.mu.Unlock()
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, req)

			up.mu.Lock()
			foreign, reached := up.foreign, up.seen > seenBefore
			up.mu.Unlock()
			if len(foreign) > 0 {
				t.Fatalf("op %d: requests in another's session reached the upstream: %q", i/2, foreign)
			}
			if kind == 0 {
				got := w.Result().Header.Values("Mcp-Session-Id")
				for _, s := range got {
					if o, ok := owner[s]; ok && o != agent.subject {
						t.Fatalf("op %d: %s was handed %q, the session of %s", i/2, agent.subject, s, o)
					}
					owner[s] = agent.subject
					handed = append(handed, s)
				}
				continue
			}
			mine := len(sessions) == 1 && owner[sessions[0]] == agent.subject
			switch {
			case !mine && w.Code != http.StatusNotFound:
				t.Fatalf("op %d: %s %s in session %q (owner %q): status %d, want 404; body %s",
					i/2, agent.subject, method, sessions, owner[sessions[0]], w.Code, w.Body)
			case !mine && reached:
				t.Fatalf("op %d: %s %s in session %q (owner %q) reached the upstream", i/2, agent.subject, method, sessions, owner[sessions[0]])
			case mine && (w.Code == http.StatusNotFound || !reached):
				t.Fatalf("op %d: %s %s in its own session %q: status %d, reached the upstream %v; body %s",
					i/2, agent.subject, method, sessions, w.Code, reached, w.Body)
			case mine && method == http.MethodDelete && w.Code/100 == 2:
				delete(owner, sessions[0]) // ended
			}
		}
	})
}
