package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/logthrottle"
)

// go-redis writes its own log lines (a pool that cannot dial, while Redis
// is down) through a process-wide logger that defaults to plain text on
// stderr, in the middle of toolgate's JSON log, several a second. They go
// to toolgate's logger instead, as JSON, at most one per redisLogEvery,
// with the number left out.
var (
	redisLogger  = &redisLog{every: logthrottle.New(redisLogEvery)}
	redisLogOnce sync.Once
)

const redisLogEvery = 10 * time.Second

type redisLog struct {
	to    atomic.Pointer[slog.Logger]
	every *logthrottle.Throttle // one key: go-redis's lines say nothing a key could tell apart
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
	ok, dropped := l.every.Allow("redis")
	if !ok {
		return
	}
	log.WarnContext(ctx, "redis client", "message", fmt.Sprintf(format, v...), "suppressed_since_last", dropped)
}
