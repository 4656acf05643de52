package approvals_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// BenchmarkInboxRedis measures one GET /approvals on a Redis store holding
// 100 waiting calls whose arguments are 1 MiB each: what one approver's
// page load costs the Redis every replica shares, and the replica. It
// needs TOOLGATE_TEST_REDIS_ADDR.
//
//	TOOLGATE_TEST_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench InboxRedis -benchmem ./approvals
func BenchmarkInboxRedis(b *testing.B) {
	addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		b.Skip("no TOOLGATE_TEST_REDIS_ADDR")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { rdb.Close() })
	prefix := "toolgate-bench:" + rand.Text() + ":"
	store, err := pending.NewRedis(rdb, pending.Options{Prefix: prefix, ResultTTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })

	const calls, size = 100, 1 << 20
	args := json.RawMessage(`{"content":"` + strings.Repeat("x", size) + `"}`)
	var keys []string
	for range calls {
		info := callinfo.Info{
			Kind: "rest", Tool: "write_note", Upstream: "notes", Subject: "agent-42", Target: "notes/today.txt",
			Arguments: args, Reasons: []string{"writes need approval"}, RuleIDs: []string{"r3"},
			Method: "POST", Path: "/tools/write_note", PolicyInput: json.RawMessage(`{"kind":"rest"}`),
		}
		c := pending.Call{
			ID: rand.Text(), Subject: "agent-42", Principal: "key:agent-42", Upstream: "notes", Tool: "write_note",
			Request: append([]byte("POST /tools/write_note\n"), args...), RequestDigest: rand.Text(),
			Info: info.Encode(), Brief: callinfo.BriefOf(info),
		}
		if _, _, err := store.Park(b.Context(), c, time.Minute); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, "{"+strings.TrimSuffix(prefix, ":")+"}:call:"+c.ID)
	}
	b.Cleanup(func() {
		base := "{" + strings.TrimSuffix(prefix, ":") + "}:"
		keys = append(keys, base+"due", base+"parked", base+"parked:key:agent-42", base+"unannounced", base+"state:waiting")
		rdb.Del(context.Background(), keys...)
	})

	signer, err := approvals.NewSigner([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	cfg := approvals.Config{Store: store, Signer: signer, PublicURL: publicURL}
	cfg.Identity, err = signin.New(signin.Config{Type: signin.TypeTrustedHeader, Header: signin.HeaderConfig{
		UserHeader: "X-User", GroupsHeader: "X-Groups", SecretHeader: "X-Proxy-Secret", Secret: proxySecret,
	}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := approvals.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	header := as("dana", "sre")
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/approvals", nil)
		req.Header = header.Clone()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || strings.Count(rec.Body.String(), "./approvals/") != calls {
			b.Fatalf("inbox: %d, %d calls listed", rec.Code, strings.Count(rec.Body.String(), "./approvals/"))
		}
	}
}
