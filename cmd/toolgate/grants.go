package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/grantseal"
	"github.com/toolgate/toolgate/pending"
)

// sealedGrants is the store's remembered grants, sealed with keys derived
// from the approvals secrets (the first seals, all are believed, as for
// parked calls): the approvals listener makes grants through it and the
// proxy looks them up through it, so a grant written to the store by
// anyone else covers no call. nil when the store keeps no grants.
func sealedGrants(st pending.Store, secrets [][]byte, log *slog.Logger, reg *prometheus.Registry) pending.Grants {
	g, ok := st.(pending.Grants)
	if !ok {
		return nil
	}
	broken := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_grants_seal_broken_total",
		Help: "Remembered grants found in the store that covered no call because their seal was missing, wrong or past its end.",
	})
	reg.MustRegister(broken)
	return grantseal.New(g, derived(secrets, grantseal.Key), func(g pending.Grant, why string) {
		broken.Inc()
		log.Warn("a grant in the store is not believed: the call asks", "grant_id", g.ID, "reason", why,
			"subject", g.Subject, "upstream", g.Upstream, "tool", g.Tool, "target_bytes", len(g.Target), "any_target", g.AnyTarget,
			"approver", g.Approver, "call_id", g.CallID)
	})
}
