package approvals

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/pending"
)

// TestSignOutFormAction: with oidc sign-in, the pages' form-action also
// allows the issuer's origin, where the sign-out form's answer redirects to
// end the provider's session (browsers check form-action on a form's
// redirects); not when sign-out keeps the provider's session.
func TestSignOutFormAction(t *testing.T) {
	for keep, want := range map[bool]string{
		false: "form-action 'self' https://idp.example.com;",
		true:  "form-action 'self';",
	} {
		id, err := signin.New(signin.Config{Type: signin.TypeOIDC, OIDC: signin.OIDCConfig{
			Issuer: "https://idp.example.com/realms/staff", ClientID: "toolgate", ClientSecret: "client-secret",
			PublicURL: "https://toolgate.example.com", CookieSecret: strings.Repeat("c", 32), AllowedGroups: []string{"sre"},
			KeepProviderSession: keep,
		}})
		if err != nil {
			t.Fatal(err)
		}
		signer, err := NewSigner([]byte(strings.Repeat("s", 32)))
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(Config{Store: pending.NewMemory(pending.Options{}), Signer: signer, Identity: id, PublicURL: "https://toolgate.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{"/approvals", "/auth/signed-out", "/nope"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, want) {
				t.Errorf("KeepProviderSession %v, GET %s: Content-Security-Policy %q, want %q", keep, target, csp, want)
			}
		}
	}
}
