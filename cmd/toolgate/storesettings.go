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
}

func newStoreSettings(st settingsChecker, log *slog.Logger, reg *prometheus.Registry) *storeSettings {
	s := &storeSettings{st: st, log: log}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_redis_unsafe_settings",
		Help: "Redis settings read on the store's nodes that could lose parked calls (an eviction policy with a memory limit); see /readyz.",
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
		return false // Redis away: asks answer 503, and /readyz says so
	}
	s.mu.Lock()
	before := s.problems
	s.problems = problems
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.problems
}
