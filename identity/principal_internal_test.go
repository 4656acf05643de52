package identity

import (
	"strings"
	"testing"
)

// TestPrincipalsDistinct checks that no two different credentials, of any
// kind, issuer or subject among awkward ones, get the same principal, and
// that a JWT principal reads back as its issuer and subject.
func TestPrincipalsDistinct(t *testing.T) {
	parts := []string{"", "a", "a#b", "b", "a#", "#b", "#", "%", "%23", "%2523", "a%23b", ":", "key:a", "jwt:a#b", "anonymous", "https://i.example", "https://i.example#x"}
	type credential struct{ kind, issuer, subject string }
	seen := map[string]credential{AnonymousPrincipal: {kind: "anonymous"}}
	add := func(p string, c credential) {
		t.Helper()
		if prev, dup := seen[p]; dup {
			t.Errorf("%+v and %+v share the principal %q", prev, c, p)
		}
		seen[p] = c
	}
	for _, sub := range parts {
		add(keyPrincipal(sub), credential{kind: "key", subject: sub})
		for _, iss := range parts {
			p := jwtPrincipal(iss, sub)
			add(p, credential{kind: "jwt", issuer: iss, subject: sub})
			esc, gotSub, ok := strings.Cut(strings.TrimPrefix(p, "jwt:"), "#")
			gotIss := strings.NewReplacer("%23", "#", "%25", "%").Replace(esc)
			if !ok || gotIss != iss || gotSub != sub {
				t.Errorf("jwtPrincipal(%q, %q) = %q reads back as %q, %q", iss, sub, p, gotIss, gotSub)
			}
		}
	}
}
