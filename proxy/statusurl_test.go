package proxy

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// askEverything asks about every call.
var askEverything = deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
	return policy.Decision{Action: policy.Ask, Reasons: []policy.Reason{{ID: "r", Message: "needs a look"}}}, nil
})

// statusURLCases are proxy_public_url values and the status URL of call
// ID they give.
var statusURLCases = []struct{ base, want string }{
	{"", "/_toolgate/calls/ID"},
	{"https://gw.example.com", "https://gw.example.com/_toolgate/calls/ID"},
	{"https://gw.example.com/", "https://gw.example.com/_toolgate/calls/ID"},
	{"https://gw.example.com/tg", "https://gw.example.com/tg/_toolgate/calls/ID"},
	{"http://10.0.0.1:8080/tg/", "http://10.0.0.1:8080/tg/_toolgate/calls/ID"},
}

func TestStatusURL(t *testing.T) {
	for _, tc := range statusURLCases {
		if got := StatusURL(tc.base, "ID"); got != tc.want {
			t.Errorf("StatusURL(%q, ID) = %q, want %q", tc.base, got, tc.want)
		}
	}
}

// TestAcceptedStatusURL: the 202 of a call still waiting after the hold
// gives its status URL in Location and status_url, absolute under
// ProxyPublicURL (its path prefix kept), relative without it; the relative
// one is the status endpoint.
func TestAcceptedStatusURL(t *testing.T) {
	for _, tc := range statusURLCases {
		t.Run(cmp.Or(tc.base, "relative"), func(t *testing.T) {
			parked := make(chan pending.Call, 1)
			env := newTestServer(t, askEverything, func(c *Config) {
				c.Pending = pending.NewMemory(pending.Options{})
				c.Hold = 50 * time.Millisecond
				c.TTL = time.Minute
				c.OnPark = func(pc pending.Call) { parked <- pc }
				c.ProxyPublicURL = tc.base
			})
			res := post(t, env.url+"/tools/Write", `{"path":"notes/a.txt"}`, "Authorization", "Bearer agent-key")
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var body struct {
				CallID    string `json:"call_id"`
				StatusURL string `json:"status_url"`
			}
			if err := json.Unmarshal(raw, &body); err != nil || res.StatusCode != http.StatusAccepted {
				t.Fatalf("status %d body %s, want 202 with a JSON body", res.StatusCode, raw)
			}
			want := strings.ReplaceAll(tc.want, "ID", (<-parked).ID)
			if body.StatusURL != want || res.Header.Get("Location") != want {
				t.Errorf("status_url %q, Location %q; want %q", body.StatusURL, res.Header.Get("Location"), want)
			}
			if tc.base != "" {
				return
			}
			req, _ := http.NewRequest(http.MethodGet, env.url+body.StatusURL, nil)
			req.Header.Set("Authorization", "Bearer agent-key")
			st, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			st.Body.Close()
			if st.StatusCode != http.StatusOK || st.Header.Get(headerCallID) != body.CallID {
				t.Errorf("GET %s: %d for call %q, want 200 for %q", body.StatusURL, st.StatusCode, st.Header.Get(headerCallID), body.CallID)
			}
		})
	}
}

// TestDeliveredStatusURL: a request that finds its call's result already
// delivered is told the status URL to follow, absolute under
// ProxyPublicURL.
func TestDeliveredStatusURL(t *testing.T) {
	for _, tc := range statusURLCases {
		var s *Server
		newTestServer(t, askEverything, func(c *Config) {
			c.ProxyPublicURL = tc.base
			c.serverHook = func(srv *Server) { s = srv }
		})
		a := outcomeAnswer(lifecycle.Outcome{Kind: lifecycle.Taken, Call: pending.Call{ID: "ID", State: pending.Executed}}, policy.Decision{})
		w := httptest.NewRecorder()
		s.respond(w, &call{id: "other", out: restResponder{}}, a)
		var p problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		if w.Code != http.StatusConflict || !strings.HasSuffix(p.Detail, "; follow "+tc.want) {
			t.Errorf("base %q: %d detail %q, want 409 ending with the status URL %s", tc.base, w.Code, p.Detail, tc.want)
		}
	}
}

// TestMCPPendingStatusURL: the "approval pending" tool result of an MCP
// call still waiting after the hold names the absolute status URL, in its
// text and in _meta toolgate/status_url, in every era.
func TestMCPPendingStatusURL(t *testing.T) {
	const base = "https://gw.example.com/tg"
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era, func(c *Config) {
				c.Hold = 100 * time.Millisecond
				c.ProxyPublicURL = base
			})
			cs := env.connect(t, era)
			res := mcpCall(t, cs, "write_note", map[string]any{"path": "notes/a.txt", "content": "later"})
			pc, ok := env.nextParked(time.Second)
			if !ok {
				t.Fatalf("nothing parked; the call answered %s", mcpDescribe(res))
			}
			want := base + "/_toolgate/calls/" + pc.ID
			if !res.IsError || !strings.Contains(mcpResultText(res), "(status: "+want+",") {
				t.Errorf("pending result %s, want its text to give the status URL %s", mcpDescribe(res), want)
			}
			if got := mcpMeta(res, "toolgate/status_url"); got != want {
				t.Errorf("_meta toolgate/status_url %q, want %q", got, want)
			}
			if got := mcpMeta(res, "toolgate/call_id"); got != pc.ID {
				t.Errorf("_meta toolgate/call_id %q, want %q", got, pc.ID)
			}
		})
	}
	// Without proxy_public_url the status URL stays relative.
	era := mcpEras[0]
	env := newMCPEnv(t, era, func(c *Config) { c.Hold = 100 * time.Millisecond })
	res := mcpCall(t, env.connect(t, era), "write_note", map[string]any{"path": "notes/b.txt", "content": "later"})
	pc, _ := env.nextParked(time.Second)
	if got, want := mcpMeta(res, "toolgate/status_url"), "/_toolgate/calls/"+pc.ID; got != want {
		t.Errorf("without proxy_public_url: _meta toolgate/status_url %q, want %q", got, want)
	}
}
