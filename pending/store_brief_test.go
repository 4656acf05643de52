package pending

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"
)

// testListBrief checks ListBrief, the list that people read: newest
// first, only the small fields, and nothing past its deadline.
func testListBrief(t *testing.T, newStore newStoreFunc) {
	s, advance := newStore(t)
	ctx := t.Context()
	listBrief := func(st State, limit int) []Call {
		t.Helper()
		got, err := s.ListBrief(ctx, st, limit)
		if err != nil {
			t.Fatalf("ListBrief(%s, %d) = %v", st, limit, err)
		}
		for _, c := range got {
			if c.Request != nil || c.Info != nil || c.Result != nil || c.RequestDigest != "" || c.AttachKey != "" {
				t.Errorf("ListBrief(%s) returned %s with more than its brief: %+v", st, c.ID, c)
			}
		}
		return got
	}
	list := func(st State, limit int) []Call {
		t.Helper()
		got, err := s.List(ctx, st, limit)
		if err != nil {
			t.Fatalf("List(%s, %d) = %v", st, limit, err)
		}
		return got
	}
	// briefOf is what ListBrief must return of the stored call id.
	briefOf := func(id string) Call {
		t.Helper()
		c := get(t, s, id)
		return Call{
			ID: c.ID, State: c.State, Subject: c.Subject, Principal: c.Principal, Upstream: c.Upstream, Tool: c.Tool,
			CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt, Quorum: c.Quorum, Approvals: c.Approvals,
			DecidedBy: c.DecidedBy, Brief: c.Brief,
		}
	}

	var parked []string // oldest first
	for i := range 4 {
		c := sampleCall()
		c.Brief = []byte(`{"kind":"rest","n":` + string(rune('0'+i)) + `}`)
		if i == 3 {
			c.Quorum = []int{2}
		}
		parked = append(parked, park(t, s, c, long).ID)
		advance(5 * time.Millisecond) // distinct times: the order is observable
	}
	// One approval of two: the call is still waiting, with its approval.
	if _, err := s.Decide(ctx, parked[3], Decision{To: Approved, By: "bob", Counts: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if got := ids(listBrief(Waiting, 10)); !slices.Equal(got, []string{parked[3], parked[2], parked[1], parked[0]}) {
		t.Errorf("ListBrief(waiting) = %v, want %v newest first", got, parked)
	}
	if got := ids(listBrief(Waiting, 2)); !slices.Equal(got, []string{parked[3], parked[2]}) {
		t.Errorf("ListBrief(waiting, 2) = %v, want the two newest %v", got, parked[2:])
	}
	got := listBrief(Waiting, 10)
	want := []Call{briefOf(parked[3]), briefOf(parked[2]), briefOf(parked[1]), briefOf(parked[0])}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("ListBrief(waiting) (-want +got):\n%s", diff)
	}
	if len(got) > 0 && (!bytes.Equal(got[0].Brief, []byte(`{"kind":"rest","n":3}`)) || len(got[0].Approvals) != 1 || len(got[0].Quorum) != 1) {
		t.Errorf("ListBrief(waiting)[0] = brief %s, approvals %v, quorum %v; want the stored ones", got[0].Brief, got[0].Approvals, got[0].Quorum)
	}

	// Decided and finished calls are listed in their states, still
	// without the big fields (the listBrief helper checks: no Result).
	decide(t, s, parked[0], Approved)
	done, err := s.Claim(ctx, parked[0], long)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, done.ID, done.Fence, Executed, Result{Status: 200, Body: []byte("big answer")}); err != nil {
		t.Fatal(err)
	}
	decide(t, s, parked[1], Approved)
	if got := listBrief(Approved, 10); len(got) != 1 || got[0].ID != parked[1] || got[0].DecidedBy != "alice" {
		t.Errorf("ListBrief(approved) = %v, want [%s] decided by alice", states(got), parked[1])
	}
	if got := ids(listBrief(Executed, 10)); !slices.Equal(got, []string{parked[0]}) {
		t.Errorf("ListBrief(executed) = %v, want [%s]", got, parked[0])
	}
	if got := ids(listBrief(Waiting, 10)); !slices.Equal(got, []string{parked[3], parked[2]}) {
		t.Errorf("ListBrief(waiting) after decisions = %v, want [parked[3], parked[2]]", got)
	}

	// Waiting calls are listed by expiry: the newest call, parked with a
	// shorter ttl, expires first and comes last.
	gone := park(t, s, sampleCall(), short)
	if got := ids(listBrief(Waiting, 10)); !slices.Equal(got, []string{parked[3], parked[2], gone.ID}) {
		t.Errorf("ListBrief(waiting) = %v, want [parked[3], parked[2], %s]: latest to expire first", got, gone.ID)
	}
	if got := ids(list(Waiting, 1)); !slices.Equal(got, []string{gone.ID}) {
		t.Errorf("List(waiting, 1) = %v, want [%s]: earliest to expire first", got, gone.ID)
	}
	// A call past its expiry is not listed as waiting, swept or not; once
	// swept it is listed as expired.
	advance(beyond)
	if got := ids(listBrief(Waiting, 10)); !slices.Equal(got, []string{parked[3], parked[2]}) {
		t.Errorf("ListBrief(waiting) past an expiry = %v, want [parked[3], parked[2]]", got)
	}
	if _, err := s.Expire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if got := ids(listBrief(Expired, 10)); !slices.Equal(got, []string{gone.ID}) {
		t.Errorf("ListBrief(expired) = %v, want [%s]", got, gone.ID)
	}

	// A call past its lease is not listed as executing, swept or not, and
	// does not use up the limit although it is the newest.
	live := claimed(t, s, long)
	advance(5 * time.Millisecond)
	claimed(t, s, short)
	advance(beyond)
	if got := ids(listBrief(Executing, 1)); !slices.Equal(got, []string{live.ID}) {
		t.Errorf("ListBrief(executing, 1) past a lease = %v, want [%s]: the lapsed call must not use up the limit", got, live.ID)
	}

	if got := listBrief(Waiting, 0); len(got) != 0 {
		t.Errorf("ListBrief(limit 0) = %v", ids(got))
	}
	if _, err := s.ListBrief(ctx, "nonsense", 10); err == nil {
		t.Error("ListBrief(nonsense) succeeded")
	}
}

// TestRedisListBriefReadsLittle: ListBrief of calls with large requests
// and infos moves a few bytes per call from Redis, not the calls.
func TestRedisListBriefReadsLittle(t *testing.T) {
	addr := redisAddr(t)
	var read atomic.Int64
	rdb := dialRedis(t, &redis.Options{Addr: addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, read: &read}, nil
	}})
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})
	ctx := t.Context()
	const calls, size = 20, 512 << 10
	big := strings.Repeat("x", size)
	for range calls {
		c := sampleCall()
		c.Request = []byte(big)
		c.Info = []byte(`{"arguments":"` + big + `"}`)
		if _, _, err := s.Park(ctx, c, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// The parks' replies held the calls; only the list is measured.
	before := read.Load()
	got, err := s.ListBrief(ctx, Waiting, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := read.Load() - before
	t.Logf("ListBrief of %d calls with %d KiB requests and infos read %d bytes from Redis", calls, size>>10, n)
	if len(got) != calls {
		t.Fatalf("ListBrief = %d calls, want %d", len(got), calls)
	}
	for _, c := range got {
		if c.Request != nil || c.Info != nil || len(c.Brief) == 0 {
			t.Fatalf("ListBrief returned %s with request %d B, info %d B, brief %d B", c.ID, len(c.Request), len(c.Info), len(c.Brief))
		}
	}
	if n > 500*calls {
		t.Errorf("ListBrief read %d bytes for %d calls, want at most 500 per call", n, calls)
	}
}

// countingConn counts the bytes read from Redis.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}
