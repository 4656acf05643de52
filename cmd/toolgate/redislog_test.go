package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/logthrottle"
	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisLog checks that go-redis's lines become JSON records of
// toolgate's log, at most one per interval, with the count left out.
func TestRedisLog(t *testing.T) {
	var buf testkit.Buffer
	now := time.Now()
	l := &redisLog{every: logthrottle.NewClock(redisLogEvery, func() time.Time { return now })}
	l.to.Store(slog.New(slog.NewJSONHandler(&buf, nil)))
	for range 5 {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 1)
	}
	recs := buf.JSONLines(t)
	if len(recs) != 1 || recs[0]["msg"] != "redis client" || !strings.Contains(recs[0]["message"].(string), "failed to dial") {
		t.Fatalf("records %v, want one JSON record", recs)
	}
	now = now.Add(redisLogEvery)
	l.Printf(context.Background(), "again")
	recs = buf.JSONLines(t)
	if len(recs) != 2 || recs[1]["suppressed_since_last"] != float64(4) {
		t.Fatalf("records %v, want a second one counting the 4 left out", recs)
	}
}
