package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// How often the store's settings are read: soon after the start, again
// until Redis answers, then now and then, since an operator may change
// them at runtime (CONFIG SET).
const (
	settingsRetry = 15 * time.Second
	settingsEvery = 10 * time.Minute
)

// settingsChecker is a store whose settings can lose parked calls
// (pending.RedisStore.CheckSettings).
type settingsChecker interface {
	CheckSettings(ctx context.Context) ([]string, error)
	Ping(ctx context.Context) error
}

// storeSettings alerts on store settings that could lose parked calls
// without an error anywhere: each problem is logged at error level when
// it is first seen, counted in toolgate_redis_unsafe_settings, and listed
// by /readyz. toolgate still starts: allow and deny do not need Redis, and
// a managed Redis may not let the operator change it at once.
type storeSettings struct {
	st  settingsChecker
	log *slog.Logger

	mu       sync.Mutex
	problems []string
	unread   string // why the last read failed while Redis answered; "" when it did not
}

// newStoreSettings registers toolgate_redis_unsafe_settings, and returns
// a watcher of st's settings, or nil for a store without any (memory),
// whose gauge stays 0.
func newStoreSettings(st any, log *slog.Logger, reg *prometheus.Registry) *storeSettings {
	var s *storeSettings
	if sc, ok := st.(settingsChecker); ok {
		s = &storeSettings{st: sc, log: log}
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_redis_unsafe_settings",
		Help: "Redis settings read on the store's nodes that could lose parked calls or refuse every ask (an eviction policy with a memory limit, no append-only file, an fsync policy other than always, replicas not waited for, fewer replicas online than pending.redis_min_replicas); see /readyz.",
	}, func() float64 { return float64(len(s.current())) }))
	return s
}

// watch reads the settings until ctx ends.
func (s *storeSettings) watch(ctx context.Context) {
	for {
		wait := settingsEvery
		if !s.check(ctx) {
			wait = settingsRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// check reads the settings once and reports whether they could be read.
func (s *storeSettings) check(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	problems, err := s.st.CheckSettings(ctx)
	if err != nil {
		// Redis away (asks answer 503, and /readyz says so), or it would
		// not tell (an ACL without INFO, a server of another kind): the
		// settings are unknown, which is not "safe". Said once.
		if s.st.Ping(ctx) == nil {
			s.mu.Lock()
			first := s.unread == ""
			s.unread = err.Error()
			s.mu.Unlock()
			if first {
				s.log.Warn("cannot read the Redis settings that could lose parked calls", "error", err)
			}
		}
		return false
	}
	s.mu.Lock()
	before := s.problems
	s.problems, s.unread = problems, ""
	s.mu.Unlock()
	for _, p := range problems {
		if !slices.Contains(before, p) {
			s.log.Error("Redis may lose parked calls", "problem", p)
		}
	}
	if len(before) > 0 && len(problems) == 0 {
		s.log.Info("Redis settings no longer put parked calls at risk")
	}
	return true
}

func (s *storeSettings) current() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.problems
}

// report adds what is known of the settings to the store's part of /readyz.
func (s *storeSettings) report(store map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) > 0 {
		store["unsafe_settings"] = s.problems // reported; allow and deny stay ready
	}
	if s.unread != "" {
		store["settings_unread"] = s.unread
	}
}
