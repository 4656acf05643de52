package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis writes its own log lines (a pool that cannot dial, while Redis
// is down) through a process-wide logger that defaults to plain text on
// stderr, in the middle of toolgate's JSON log, several a second. They go
// to toolgate's logger instead, as JSON, at most one per redisLogEvery,
// with the number left out.
var (
	redisLogger   = &redisLog{}
	redisLogOnce  sync.Once
	redisLogEvery = 10 * time.Second
)

type redisLog struct {
	to      atomic.Pointer[slog.Logger]
	mu      sync.Mutex
	last    time.Time
	dropped int
}

// useRedisLog sends go-redis's log lines to log from now on.
func useRedisLog(log *slog.Logger) {
	redisLogger.to.Store(log)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger) })
}

// Printf implements go-redis's logging interface.
func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	log := l.to.Load()
	if log == nil {
		return
	}
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < redisLogEvery {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	log.WarnContext(ctx, "redis client", "message", fmt.Sprintf(format, v...), "suppressed_since_last", dropped)
}
