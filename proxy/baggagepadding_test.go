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

// upstreamTenant is the tenant member an upstream instrumented with
// OpenTelemetry's W3C Baggage propagator (go.opentelemetry.io/otel, a
// dependency of toolgate itself) reads from the Baggage values vals.
func upstreamTenant(vals ...string) string {
	h := http.Header{}
	for _, v := range vals {
		h.Add("Baggage", v)
	}
	ctx := propagation.Baggage{}.Extract(context.Background(), propagation.HeaderCarrier(h))
	return baggage.FromContext(ctx).Member("tenant").Value()
}

// TestSentryPaddingKeepsBoundMembers: W3C Baggage caps a header at 180
// members and 8192 bytes, and OpenTelemetry's propagator discards the
// whole header past either. An agent that pads the approved Baggage with
// sentry- members must not run under the grant (its upstream would read no
// tenant at all, not the bound tenant=sandbox): such members are left out
// of what is bound only as Sentry writes them, and a header past the
// limits is bound whole.
func TestSentryPaddingKeepsBoundMembers(t *testing.T) {
	approved := "tenant=sandbox"
	if got := upstreamTenant(approved); got != "sandbox" {
		t.Fatalf("upstream reads tenant %q from the approved call's Baggage", got)
	}
	_, send := grantFromFirstCall(t, "Baggage", approved)
	var many strings.Builder
	for i := range 200 {
		fmt.Fprintf(&many, "sentry-p%d=1,", i)
	}
	for name, bag := range map[string][]string{
		"200 sentry-* members":          {many.String() + approved},
		"one 8200-byte sentry-* member": {"sentry-pad=" + strings.Repeat("a", 8200) + "," + approved},
	} {
		up := upstreamTenant(bag...)
		h := []string{}
		for _, v := range bag {
			h = append(h, "Baggage", v)
		}
		status, decision, _ := send(`{"path":"a.txt","content":"one"}`, h...)
		if status == 200 && up != "sandbox" {
			t.Errorf("%s: ran under the grant made on %q (%d %q), but the upstream reads tenant %q", name, approved, status, decision, up)
		}
	}
}
