package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// runBareAsk is the floor of the ask row, as the bare proxy is the floor
// of the allow row: the same HTTP exchanges an ask with an instant
// approver makes, and nothing else. It holds the agent's call, announces
// it to the approver as a CloudEvent (from a goroutine, as toolgate's
// notifier does), takes the approver's POST /api/approvals/{id}, forwards
// the call with an httputil.ReverseProxy, announces the outcome and
// answers the agent. No policy, no identity beyond one key comparison, no
// store, no logs: what is left between this row and "toolgate ask" is
// what toolgate does beyond moving the bytes.
//
// With -redis it is the floor of the Redis ask row: the same, plus the
// fewest Redis round trips an ask that may be held on one replica and
// approved on another needs, and nothing else: the call stored (park),
// the decision stored and published (one pipeline), the holder woken by
// the message on one shared subscription, the call claimed once (SET NX),
// the result stored. No scripts, indexes, caps, leases or fences.
func runBareAsk(args []string) error {
	fs := flag.NewFlagSet("bareask", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "address")
	up := fs.String("upstream", "", "upstream URL")
	notifyURL := fs.String("notify", "", "CloudEvents receiver (the approver)")
	redisAddr := fs.String("redis", "", "Redis: store the call, the decision, the claim and the result there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*up)
	if err != nil {
		return err
	}
	b := newBareAsk("http://"+*addr, *notifyURL, os.Getenv("BENCH_APPROVER_KEY"), u)
	if *redisAddr != "" {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := b.useRedis(ctx, redis.NewClient(&redis.Options{Addr: *redisAddr}), "bench-bareask-"+secret()[:8]+":"); err != nil {
			return err
		}
	}
	return serveUntilSignal(*addr, b)
}

// newBareAsk is the bare ask's handler: self is its own URL (the approval
// link's host), notify the approver's, key the approver's API key.
func newBareAsk(self, notify, key string, up *url.URL) *bareAsk {
	b := &bareAsk{
		self:    self,
		notify:  notify,
		key:     key,
		rp:      &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up) }, Transport: transport()},
		client:  &http.Client{Transport: transport(), Timeout: 10 * time.Second},
		waiting: map[string]chan string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/approvals/{id}", b.approve)
	mux.HandleFunc("GET /_bench/ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/", b.call)
	b.mux = mux
	return b
}

type bareAsk struct {
	self, notify, key string
	rp                *httputil.ReverseProxy
	client            *http.Client
	mux               *http.ServeMux
	// rdb, when set, holds the calls (useRedis); prefix starts its keys.
	rdb    *redis.Client
	prefix string

	mu      sync.Mutex
	waiting map[string]chan string // call ID → the decision, once made
}

func (b *bareAsk) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.mux.ServeHTTP(w, r) }

// useRedis keeps the calls in Redis, under keys that start with prefix,
// and wakes held calls from one subscription to the decisions.
func (b *bareAsk) useRedis(ctx context.Context, rdb *redis.Client, prefix string) error {
	b.rdb, b.prefix = rdb, prefix
	sub := rdb.Subscribe(ctx, prefix+"decided")
	if _, err := sub.Receive(ctx); err != nil {
		return err
	}
	go func() {
		for m := range sub.Channel() {
			id, d, _ := strings.Cut(m.Payload, " ")
			b.mu.Lock()
			decided, ok := b.waiting[id]
			b.mu.Unlock()
			if ok {
				select {
				case decided <- d:
				default:
				}
			}
		}
	}()
	return nil
}

// call holds the agent's call until the approver decides it.
func (b *bareAsk) call(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:])
	if b.rdb != nil && b.rdb.Set(r.Context(), b.prefix+id, body, time.Minute).Err() != nil {
		http.Error(w, "store", http.StatusServiceUnavailable)
		return
	}
	decided := make(chan string, 1)
	b.mu.Lock()
	b.waiting[id] = decided
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
	}()
	go b.announce("dev.toolgate.approval.requested", id, map[string]string{"approval_url": b.self + "/approvals/" + id})
	var d string
	select {
	case d = <-decided:
	case <-time.After(10 * time.Second):
		http.Error(w, "not decided", http.StatusGatewayTimeout)
		return
	case <-r.Context().Done():
		return
	}
	go b.announce("dev.toolgate.approval.resolved", id, map[string]string{"outcome": d})
	if d != "approve" {
		http.Error(w, "rejected", http.StatusForbidden)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if b.rdb == nil {
		b.rp.ServeHTTP(w, r)
		return
	}
	if ok, err := b.rdb.SetNX(r.Context(), b.prefix+id+":claim", "1", time.Minute).Result(); err != nil || !ok {
		http.Error(w, "not claimed", http.StatusConflict)
		return
	}
	rec := &recorded{ResponseWriter: w}
	b.rp.ServeHTTP(rec, r)
	_ = b.rdb.Set(r.Context(), b.prefix+id+":result", rec.body.Bytes(), time.Minute).Err()
}

// recorded passes a response on and keeps its body.
type recorded struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorded) Write(p []byte) (int, error) {
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}

// approve takes the approver's decision on a held call.
func (b *bareAsk) approve(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(b.key)) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var req struct{ Decision string }
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	id := r.PathValue("id")
	if b.rdb != nil {
		// Stored and published in one round trip; the holder, on this
		// replica or another, hears it on its subscription.
		var first *redis.BoolCmd
		_, err := b.rdb.Pipelined(r.Context(), func(p redis.Pipeliner) error {
			first = p.SetNX(r.Context(), b.prefix+id+":decision", req.Decision, time.Minute)
			p.Publish(r.Context(), b.prefix+"decided", id+" "+req.Decision)
			return nil
		})
		switch {
		case err != nil:
			http.Error(w, "store", http.StatusServiceUnavailable)
			return
		case !first.Val():
			http.Error(w, "decided already", http.StatusConflict)
			return
		}
	} else {
		b.mu.Lock()
		decided, ok := b.waiting[id]
		b.mu.Unlock()
		if !ok {
			http.Error(w, "no such call", http.StatusNotFound)
			return
		}
		select {
		case decided <- req.Decision:
		default:
			http.Error(w, "decided already", http.StatusConflict)
			return
		}
	}
	state := "rejected"
	if req.Decision == "approve" {
		state = "approved"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"call_id": id, "state": state})
}

// announce posts one CloudEvent to the approver.
func (b *bareAsk) announce(typ, id string, data map[string]string) {
	ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "type": typ, "source": "bare-ask", "id": id, "data": data})
	res, err := b.client.Post(b.notify, "application/cloudevents+json", bytes.NewReader(ev))
	if err != nil {
		fmt.Fprintln(os.Stderr, "announce:", err)
		return
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
}
