package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// TestApproversSeeThePathAsSent: an agent percent-encodes a "?" in the
// path. Approvers were shown the decoded path, so the request read
// "DELETE /admin/users/42?dry_run=true" (a dry run), while the upstream
// got no query at all: "?dry_run=true" is part of the last path segment
// (an Express upstream's parseInt("42?dry_run=true") is 42: user 42 is
// deleted for real). They are now shown the path approving sends: escapes
// kept, without the upstream's prefix.
func TestApproversSeeThePathAsSent(t *testing.T) {
	for _, prefix := range []string{"/", "/files/"} {
		pe := newParkEnv(t, func(c *Config) { c.Upstreams[0].Prefix = prefix })
		var parked pending.Call
		go func() {
			pc := pe.nextParked(t)
			parked = pc
			if _, err := pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
				t.Error(err)
			}
		}()
		req, _ := http.NewRequest(http.MethodDelete, pe.url+strings.TrimSuffix(prefix, "/")+"/admin/users/42%3Fdry_run=true", strings.NewReader(""))
		req.Header.Set("Authorization", "Bearer agent-key")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		got := pe.upstream.Requests()
		if len(got) != 1 {
			t.Fatalf("prefix %s: upstream got %d requests (status %d)", prefix, len(got), res.StatusCode)
		}
		if info := callinfo.Decode(parked.Info); info.Path != "/admin/users/42%3Fdry_run=true" || got[0].Query != "" {
			t.Errorf("prefix %s: approvers are shown %q, the upstream got path %q and query %q; want the path approving sends, escapes kept, and no query",
				prefix, info.Path, got[0].Path, got[0].Query)
		}
	}
}
