package pending

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRedisRetryWrites: a retry of a write that ran already (its nonce
// found: a claim, a finish, a delivery, a park whose reply was lost)
// answers as the first run did, and writes too. On Redis 7.2 and later a
// WAIT waits for its own connection's last write only: a retry sent on
// another connection that wrote nothing would be confirmed at once,
// whether or not the replicas have the first run's claim, and a failover
// could then lose a claim that runs. Each retry here must move the
// primary's replication offset.
func TestRedisRetryWrites(t *testing.T) {
	rdb, _ := primaryWithReplica(t) // the offset moves only with a replica
	ctx := t.Context()
	s, err := NewRedis(rdb, Options{Prefix: "retry:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	offset := func() int64 {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("INFO replication has no master_repl_offset")
		return 0
	}
	// twice runs sc with args and again, and checks that the second
	// run answered as the first and moved the offset.
	twice := func(what string, sc *redis.Script, id string, args ...any) []any {
		t.Helper()
		first, err := s.runCall(ctx, sc, true, id, nil, args...)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		before := offset()
		again, err := s.runCall(ctx, sc, true, id, nil, args...)
		if err != nil || again[0] != first[0] {
			t.Fatalf("%s again: %v, %v; want %v as the first time", what, again[0], err, first[0])
		}
		if after := offset(); after == before {
			t.Errorf("%s again (%v) wrote nothing: its WAIT would confirm no earlier write", what, again[0])
		}
		return first
	}

	c := park(t, s, sampleCall(), long)
	before := offset()
	if _, attached, err := s.Park(ctx, c, long); err != nil || attached {
		t.Fatalf("park again: attached %v, %v; want the call as parked", attached, err)
	}
	if offset() == before {
		t.Error("park again wrote nothing: its WAIT would confirm no earlier write")
	}
	twice("decide", fromWaitingScript, c.ID, string(Approved), "alice", "", "nonce-decide", s.window.Milliseconds(), "", int64(0))
	claimed := twice("claim", claimScript, c.ID, long.Milliseconds(), "nonce-claim")
	got, err := s.transition("claiming", c.ID, claimed)
	if err != nil {
		t.Fatal(err)
	}
	twice("finish", finishScript, c.ID, strconv.FormatInt(got.Fence, 10), string(Executed), "nonce-finish", "rs", "200")
	twice("deliver", deliverScript, c.ID, "nonce-deliver")
}
