package proxy

import (
	"testing"

	"github.com/toolgate/toolgate/internal/callinfo"
)

// TestGrantBoundToBaggage: Baggage (W3C) carries application key/values
// that upstreams and meshes act on (tenant, routing keys such as
// sd-routing-key), and the approver is shown it: a grant made from a call
// that sent one Baggage does not cover a call that sends another.
func TestGrantBoundToBaggage(t *testing.T) {
	g := newGrantTest(t)
	p0 := g.grant("Baggage", "tenant=sandbox,sd-routing-key=sandbox-1")
	shown := false
	for _, h := range callinfo.Decode(p0.Info).Headers.List {
		shown = shown || h.Name == "Baggage" && h.Value == "tenant=sandbox,sd-routing-key=sandbox-1"
	}
	if !shown {
		t.Fatalf("the approver is not shown the Baggage")
	}
	status, decision, _, _ := g.send(`{"path":"a.txt","content":"one"}`, "Baggage", "tenant=prod")
	if status == 200 && decision == outcomeAllow {
		t.Errorf("a call sending Baggage tenant=prod ran under a grant approved for tenant=sandbox (upstream got %q)",
			g.env.upstream.Requests()[0].Header.Get("Baggage"))
	}
}

// TestBaggageRetryRefused: likewise a call sending Baggage tenant=prod
// that finds a parked call sending tenant=sandbox is refused (409), as
// X-Account: prod is, not answered with its outcome.
func TestBaggageRetryRefused(t *testing.T) {
	pe, send := retryEnv(t)
	first := parkApproved(t, pe, send, "Baggage", "tenant=sandbox")
	if status, id := send("Baggage", "tenant=prod"); status != 409 {
		t.Errorf("a call with Baggage tenant=prod that finds parked call %s (tenant=sandbox): %d as call %s, want 409", first.ID, status, id)
	}
}
