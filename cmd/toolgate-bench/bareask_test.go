package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestBareAsk: the ask row's floor makes the exchanges it stands for. The
// agent's call reaches the upstream only once the approver approved it
// through the API with its key, two events are announced (requested,
// then resolved), and a rejected call never reaches the upstream.
func TestBareAsk(t *testing.T) { testBareAsk(t, "") }

// TestBareAskRedis: the same with the calls in Redis (the Redis ask row's
// floor): the approved call, and it alone, was claimed and its result
// stored.
func TestBareAskRedis(t *testing.T) {
	addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		testkit.Unavailable(t, "TOOLGATE_TEST_REDIS_ADDR is not set: the Redis tests need a Redis")
	}
	testBareAsk(t, addr)
}

func testBareAsk(t *testing.T, redisAddr string) {
	var mu sync.Mutex
	var got []string // bodies the upstream received
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer upstream.Close()

	decision := "approve"
	var events []string
	approver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Type, ID string
			Data     struct {
				ApprovalURL string `json:"approval_url"`
			}
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Errorf("event: %v", err)
		}
		mu.Lock()
		events = append(events, ev.Type)
		mu.Unlock()
		if ev.Type != "dev.toolgate.approval.requested" {
			return
		}
		link, _ := url.Parse(ev.Data.ApprovalURL)
		for _, key := range []string{"wrong", "approver-key"} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+link.Host+"/api/approvals/"+ev.ID, strings.NewReader(`{"decision":"`+decision+`"}`))
			req.Header.Set("Authorization", "Bearer "+key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			if want := map[string]int{"wrong": 401, "approver-key": 200}[key]; res.StatusCode != want {
				t.Errorf("approve with key %q: %d, want %d", key, res.StatusCode, want)
			}
		}
	}))
	defer approver.Close()

	up, _ := url.Parse(upstream.URL)
	var bare http.Handler // needs the server's URL: set once it has one
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { bare.ServeHTTP(w, r) }))
	defer srv.Close()
	bare = newBareAsk(srv.URL, approver.URL, "approver-key", up)
	var rdb *redis.Client
	prefix := "test-bareask-" + secret()[:8] + ":"
	if redisAddr != "" {
		rdb = redis.NewClient(&redis.Options{Addr: redisAddr})
		t.Cleanup(func() { rdb.Close() })
		if err := bare.(*bareAsk).useRedis(t.Context(), rdb, prefix); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		decision string
		status   int
		reached  int
	}{{"approve", 200, 1}, {"reject", 403, 1}} {
		decision = tc.decision
		res, err := http.Post(srv.URL+"/tools/write_note", "application/json", bytes.NewReader([]byte(`{"path":"notes/a"}`)))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.decision, res.StatusCode, tc.status)
		}
		mu.Lock()
		if len(got) != tc.reached || got[0] != `{"path":"notes/a"}` {
			t.Errorf("%s: upstream received %q", tc.decision, got)
		}
		mu.Unlock()
	}
	// The resolved events are sent after the answer: wait for them.
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		n := map[string]int{}
		for _, e := range events {
			n[e]++
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); count()["dev.toolgate.approval.resolved"] < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); len(n) != 2 || n["dev.toolgate.approval.requested"] != 2 || n["dev.toolgate.approval.resolved"] != 2 {
		t.Errorf("events %v, want two of each", n)
	}
	if rdb != nil {
		for suffix, want := range map[string]int{"": 2, ":decision": 2, ":claim": 1, ":result": 1} {
			keys, err := rdb.Keys(t.Context(), prefix+"*"+suffix).Result()
			n := 0
			for _, k := range keys {
				if suffix != "" || !strings.Contains(k[len(prefix):], ":") {
					n++
				}
			}
			if err != nil || n != want {
				t.Errorf("%d keys *%s in Redis (%v), want %d", n, suffix, err, want)
			}
		}
	}
}
