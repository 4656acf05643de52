package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
)

// upstreamTenants is what an upstream reads as its tenant from the Baggage
// header h it received: with OpenTelemetry Go's W3C propagator (a
// dependency of toolgate, over every Baggage line), and with a reader of
// the first line only (Go's http.Header.Get; OpenTelemetry Python's ASGI
// getter takes the first value too).
func upstreamTenants(h http.Header) (otel, firstLine string) {
	ctx := propagation.Baggage{}.Extract(context.Background(), propagation.HeaderCarrier(h))
	otel = baggage.FromContext(ctx).Member("tenant").Value()
	b, _ := baggage.Parse(h.Get("Baggage"))
	return otel, b.Member("tenant").Value()
}

// TestBaggageLinesAndLimits: a grant made from a call sending Baggage
// tenant=sandbox (bound) never lets through a call whose upstream reads no
// tenant. Sentry's per-trace members are left out of what is bound only in
// a header of one line within OpenTelemetry Go's limits: a first line of
// Sentry members alone (a first-line reader reads no tenant), two lines
// whose separator takes them past 8192 bytes, and Sentry members that push
// the tenant past the 64th member are each bound whole, so the call asks.
func TestBaggageLinesAndLimits(t *testing.T) {
	const trace = "sentry-trace_id=88e1b2c3d4e5f60718293a4b5c6d7e8f"
	var sixty strings.Builder
	for i := range 60 {
		fmt.Fprintf(&sixty, "app%d=1,", i)
	}
	for _, tc := range []struct {
		name     string
		approved []string // the Baggage lines of the call the grant is made from
		later    []string // those of the later call
	}{
		{
			// A first-line reader sees only the Sentry line.
			name:     "Sentry line first",
			approved: []string{"tenant=sandbox"},
			later:    []string{trace + ",sentry-sampled=true", "tenant=sandbox"},
		},
		{
			// 14 + 8178 = 8192 bytes by boundBaggage's sum; 8193 with
			// the separator OpenTelemetry counts between lines.
			name:     "8192 bytes but for the separator",
			approved: []string{"tenant=sandbox"},
			later:    []string{"tenant=sandbox", "sentry-sampled=true" + strings.Repeat(" ", 8178-len("sentry-sampled=true,")-len(trace)) + "," + trace},
		},
		{
			// 61 members are read whole; 4 Sentry members before them
			// push tenant past OpenTelemetry Go's 64th.
			name:     "past 64 members",
			approved: []string{sixty.String() + "tenant=sandbox"},
			later:    []string{trace + ",sentry-sampled=true,sentry-sample_rate=1,sentry-sample_rand=0.5," + sixty.String() + "tenant=sandbox"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGrantTest(t)
			var first []string
			for _, v := range tc.approved {
				first = append(first, "Baggage", v)
			}
			g.grant(first...)
			g.env.upstream.Reset()
			var h []string
			for _, v := range tc.later {
				h = append(h, "Baggage", v)
			}
			status, decision, _, _ := g.send(`{"path":"a.txt","content":"one"}`, h...)
			if status != 200 {
				return // it asked: sound
			}
			reqs := g.env.upstream.Requests()
			if len(reqs) != 1 {
				t.Fatalf("ran under the grant (%d %q) but the upstream got %d requests", status, decision, len(reqs))
			}
			otel, firstLine := upstreamTenants(reqs[0].Header)
			if otel != "sandbox" || firstLine != "sandbox" {
				t.Errorf("ran under the grant made on Baggage %q (%d %q), but the upstream, sent %d Baggage line(s) of %d bytes, reads tenant %q (OpenTelemetry Go) / %q (first line)",
					tc.approved, status, decision, len(reqs[0].Header.Values("Baggage")), len(strings.Join(reqs[0].Header.Values("Baggage"), ",")), otel, firstLine)
			}
		})
	}
}
