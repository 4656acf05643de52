package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/hooks"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/proxy"
)

// newHooks builds the PreToolUse hooks of the configuration, with their
// metrics; nil when there are none (the proxy then asks nobody).
func (a *app) newHooks(cfg *config.Config) (proxy.HookRunner, error) {
	if len(cfg.Hooks) == 0 {
		return nil, nil
	}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_hook_calls_total",
		Help: "PreToolUse hook requests by hook and outcome (allow, ask, deny, none, failure).",
	}, []string{"hook", "outcome"})
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolgate_hook_duration_seconds",
		Help:    "Time a PreToolUse hook took to answer (or to fail), by hook.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"hook"})
	a.registry.MustRegister(calls, seconds)
	hs := make([]hooks.Hook, 0, len(cfg.Hooks))
	for _, h := range cfg.Hooks {
		hs = append(hs, hooks.Hook{
			Name: h.Name, URL: h.URL, Upstream: h.Match.Upstream, Tool: h.Match.Tool,
			Timeout: h.Timeout.Std(), OnFailure: h.OnFailure, Secret: h.Secret.Reveal(),
		})
		for _, o := range []string{hooks.Allow, hooks.Ask, hooks.Deny, hooks.None, hooks.Failure} {
			calls.WithLabelValues(h.Name, o)
		}
	}
	r, err := hooks.New(hooks.Options{
		Hooks: hs, Logger: a.log, MaxInFlight: cfg.Limits.MaxHookRequests,
		OnResult: func(hook, outcome string, d time.Duration) {
			calls.WithLabelValues(hook, outcome).Inc()
			seconds.WithLabelValues(hook).Observe(d.Seconds())
		},
	})
	if err != nil {
		return nil, err
	}
	a.onClose("hooks", 0, func(context.Context) error { r.Close(); return nil })
	return r, nil
}
