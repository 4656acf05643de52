package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/pending"
)

// BenchmarkAskApproved is the ask cycle of a REST call whose approver
// decides the moment it parks (the store's Decide, from the park
// notification): park, hold, wake, claim, execute, deliver; beside the
// same call allowed. The memory store, so what is measured is toolgate's
// own work; the approver's side (a notification, the approvals API) is not.
func BenchmarkAskApproved(b *testing.B) {
	up := benchUpstream(b, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"ok"}`)
	})
	u, _ := url.Parse(up.URL)
	engine := seedEngineRules(b, "rules:\n  - {id: a, effect: allow, tool: read_file, target: \"docs/**\"}\n  - {id: q, effect: ask, tool: write_note, target: \"notes/**\"}\n")
	store := pending.NewMemory(pending.Options{})
	auth, _ := identity.New(identity.Config{Anonymous: true})
	s, err := New(Config{
		Upstreams: []Upstream{{Name: "u", URL: u}}, Decider: engine, Auth: auth,
		Pending: store, Hold: 10 * time.Second, TTL: time.Minute,
		OnPark: func(pc pending.Call) {
			_, _ = store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "bench"})
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	b.Cleanup(ts.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for _, bc := range []struct{ name, tool, path string }{
		{"allow", "read_file", "docs/a"},
		{"ask-approved", "write_note", "notes/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				// Each call its own arguments: an identical one would attach.
				body := `{"path":"` + bc.path + strings.Repeat("x", n%7) + itoa(n) + `"}`
				req, _ := http.NewRequest("POST", ts.URL+"/tools/"+bc.tool, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
		})
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
