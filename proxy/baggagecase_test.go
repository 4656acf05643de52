package proxy

import "testing"

// TestSentryPrefixCaseSensitive: Sentry's SDKs write their members with
// the lowercase prefix "sentry-" only, and W3C Baggage keys are
// case-sensitive: an application's member whose key starts with
// "Sentry-" or "SENTRY-" is bound, and a call that adds one asks.
func TestSentryPrefixCaseSensitive(t *testing.T) {
	_, send := grantFromFirstCall(t, "Baggage", "tenant=sandbox")
	for _, bag := range []string{"tenant=sandbox,SENTRY-TENANT=prod", "tenant=sandbox, Sentry-Route=admin"} {
		if status, decision, _ := send(`{"path":"a.txt","content":"one"}`, "Baggage", bag); status == 200 {
			t.Errorf("Baggage %q (an application member in another case) under a grant made on %q: %d %q, want it to ask", bag, "tenant=sandbox", status, decision)
		}
	}
}
