package approvals_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/pending"
)

func testSigner(t *testing.T, secret string) *approvals.Signer {
	t.Helper()
	s, err := approvals.NewSigner([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testCall() pending.Call {
	return pending.Call{ID: "CALLONE", RequestDigest: strings.Repeat("ab", 32), ExpiresAt: t0.Add(time.Hour)}
}

func TestNewSigner_RefusesShortSecrets(t *testing.T) {
	if _, err := approvals.NewSigner([]byte(strings.Repeat("x", 31))); err == nil {
		t.Error("NewSigner(31 bytes) = nil error, want an error")
	}
	if _, err := approvals.NewSigner(nil); err == nil {
		t.Error("NewSigner(nil) = nil error, want an error")
	}
	if _, err := approvals.NewSigner([]byte(strings.Repeat("x", 32))); err != nil {
		t.Errorf("NewSigner(32 bytes) = %v, want nil", err)
	}
}

func TestSigner_RoundTrip(t *testing.T) {
	s := testSigner(t, testSecret)
	c := testCall()
	tok := s.Token(c)
	if tok != s.Token(c) {
		t.Error("Token is not deterministic")
	}
	if err := s.Check(tok, c, t0); err != nil {
		t.Errorf("Check(own token) = %v, want nil", err)
	}
	if err := s.Check(tok, c, c.ExpiresAt.Add(-time.Second)); err != nil {
		t.Errorf("Check a second before expiry = %v, want nil", err)
	}
	if err := s.Check(tok, c, c.ExpiresAt); !errors.Is(err, approvals.ErrTokenExpired) {
		t.Errorf("Check at expiry = %v, want ErrTokenExpired", err)
	}
	// Fields the token does not bind do not matter.
	other := c
	other.State, other.Subject, other.DecidedBy = pending.Approved, "someone", "alice"
	if err := s.Check(tok, other, t0); err != nil {
		t.Errorf("Check after a state change = %v, want nil", err)
	}
}

// Each bound field changes the token, and a token does not check against a
// call that differs in any of them (docs/security.md, INV-7).
func TestSigner_BindsEveryField(t *testing.T) {
	s := testSigner(t, testSecret)
	c := testCall()
	tok := s.Token(c)
	tests := []struct {
		name   string
		signer *approvals.Signer
		edit   func(*pending.Call)
	}{
		{"call ID", s, func(c *pending.Call) { c.ID = "CALLTWO" }},
		{"request digest", s, func(c *pending.Call) { c.RequestDigest = strings.Repeat("ab", 31) + "ac" }},
		{"expiry", s, func(c *pending.Call) { c.ExpiresAt = c.ExpiresAt.Add(time.Second) }},
		{"secret", testSigner(t, testSecret+"!"), func(*pending.Call) {}},
		// Length prefixes keep field boundaries: moving a character from
		// the ID to the digest is another call.
		{"field boundary", s, func(c *pending.Call) { c.ID, c.RequestDigest = c.ID+"a", "b"+strings.Repeat("ab", 31) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := c
			tt.edit(&changed)
			if got := tt.signer.Token(changed); got == tok {
				t.Errorf("the token did not change with the %s", tt.name)
			}
			if err := tt.signer.Check(tok, changed, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
				t.Errorf("Check(token, call with another %s) = %v, want ErrTokenInvalid", tt.name, err)
			}
		})
	}
}

func TestSigner_RefusesTamperedTokens(t *testing.T) {
	s := testSigner(t, testSecret)
	c := testCall()
	tok := s.Token(c)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		t.Fatalf("token %q is not v1.<exp>.<mac>", tok)
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	later := c
	later.ExpiresAt = c.ExpiresAt.Add(24 * time.Hour)
	laterExp := strings.Split(s.Token(later), ".")[1]
	tests := map[string]string{
		"empty":                    "",
		"one part":                 "v1",
		"two parts":                parts[0] + "." + parts[1],
		"four parts":               tok + ".x",
		"other version":            "v2." + parts[1] + "." + parts[2],
		"first MAC character":      parts[0] + "." + parts[1] + "." + flip(parts[2], 0),
		"last MAC character":       parts[0] + "." + parts[1] + "." + flip(parts[2], len(parts[2])-1),
		"MAC cut short":            parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-2],
		"MAC padded":               tok + "=",
		"MAC in standard base64":   parts[0] + "." + parts[1] + "." + strings.NewReplacer("-", "+", "_", "/").Replace(parts[2]) + "+",
		"later expiry, same MAC":   parts[0] + "." + laterExp + "." + parts[2],
		"expiry spelled with plus": parts[0] + ".+" + parts[1] + "." + parts[2],
		"expiry with leading zero": parts[0] + ".0" + parts[1] + "." + parts[2],
		"trailing space":           tok + " ",
	}
	for name, bad := range tests {
		if err := s.Check(bad, c, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
			t.Errorf("%s: Check(%q) = %v, want ErrTokenInvalid", name, bad, err)
		}
	}
	// An expiry in the token is believed only with a good MAC: a forged
	// later expiry is invalid, not merely unexpired.
	if err := s.Check(parts[0]+"."+laterExp+"."+parts[2], c, c.ExpiresAt.Add(time.Hour)); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("forged expiry after the real one = %v, want ErrTokenInvalid", err)
	}
}

func TestSigner_ApprovalURL(t *testing.T) {
	s := testSigner(t, testSecret)
	c := testCall()
	want := "https://toolgate.example.com/approvals/CALLONE?token=" + s.Token(c)
	for _, base := range []string{"https://toolgate.example.com", "https://toolgate.example.com/"} {
		if got := s.ApprovalURL(base, c); got != want {
			t.Errorf("ApprovalURL(%q) = %q, want %q", base, got, want)
		}
	}
}

// A confirmation token and an approval token for the same call differ, and
// neither checks as the other: the requester's link approves nothing, and
// an approver's link confirms nothing.
func TestSigner_ConfirmTokenIsAnotherPurpose(t *testing.T) {
	s := testSigner(t, testSecret)
	c := testCall()
	approval, confirm := s.Token(c), s.ConfirmToken(c)
	if confirm == approval {
		t.Fatal("ConfirmToken == Token")
	}
	if confirm != s.ConfirmToken(c) {
		t.Error("ConfirmToken is not deterministic")
	}
	if err := s.CheckConfirm(confirm, c, t0); err != nil {
		t.Errorf("CheckConfirm(own token) = %v, want nil", err)
	}
	if err := s.Check(confirm, c, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("Check(confirmation token) = %v, want ErrTokenInvalid", err)
	}
	if err := s.CheckConfirm(approval, c, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("CheckConfirm(approval token) = %v, want ErrTokenInvalid", err)
	}
	// The wrong purpose stays invalid after the expiry: it never reads as
	// a genuine token that merely expired.
	if err := s.Check(confirm, c, c.ExpiresAt); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("Check(confirmation token) after expiry = %v, want ErrTokenInvalid", err)
	}
	if err := s.CheckConfirm(confirm, c, c.ExpiresAt); !errors.Is(err, approvals.ErrTokenExpired) {
		t.Errorf("CheckConfirm at expiry = %v, want ErrTokenExpired", err)
	}
	other := c
	other.ID = "CALLTWO"
	if err := s.CheckConfirm(confirm, other, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("CheckConfirm(token, another call) = %v, want ErrTokenInvalid", err)
	}
	want := "https://toolgate.example.com/confirm/CALLONE?token=" + confirm
	for _, base := range []string{"https://toolgate.example.com", "https://toolgate.example.com/"} {
		if got := s.ConfirmURL(base, c); got != want {
			t.Errorf("ConfirmURL(%q) = %q, want %q", base, got, want)
		}
	}
}

// TestSigner_Rotation: a Signer signs with its secret and accepts what its
// previous secrets signed (links, confirmation links, forms), and nothing
// signed by a secret it was not given; a signer that dropped the old
// secret refuses its tokens.
func TestSigner_Rotation(t *testing.T) {
	oldSecret, newSecret, otherSecret := strings.Repeat("o", 32), strings.Repeat("n", 32), strings.Repeat("x", 32)
	old := testSigner(t, oldSecret)
	rotated, err := approvals.NewSigner([]byte(newSecret), []byte(oldSecret))
	if err != nil {
		t.Fatal(err)
	}
	c := testCall()
	if rotated.Token(c) != testSigner(t, newSecret).Token(c) {
		t.Error("a rotated signer does not sign with its new secret")
	}
	if err := rotated.Check(old.Token(c), c, t0); err != nil {
		t.Errorf("Check(token of the previous secret) = %v, want nil", err)
	}
	if err := rotated.CheckConfirm(old.ConfirmToken(c), c, t0); err != nil {
		t.Errorf("CheckConfirm(token of the previous secret) = %v, want nil", err)
	}
	if !rotated.CheckFormToken(old.FormToken("alice", c.ID), "alice", c.ID) {
		t.Error("CheckFormToken(form token of the previous secret) = false, want true")
	}
	// Still bound to its purpose, call and expiry under the previous secret.
	if err := rotated.Check(old.ConfirmToken(c), c, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("Check(confirm token of the previous secret) = %v, want ErrTokenInvalid", err)
	}
	if err := rotated.Check(old.Token(c), c, c.ExpiresAt); !errors.Is(err, approvals.ErrTokenExpired) {
		t.Errorf("Check(previous secret's token at expiry) = %v, want ErrTokenExpired", err)
	}
	if err := rotated.Check(testSigner(t, otherSecret).Token(c), c, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("Check(token of a secret never given) = %v, want ErrTokenInvalid", err)
	}
	if err := testSigner(t, newSecret).Check(old.Token(c), c, t0); !errors.Is(err, approvals.ErrTokenInvalid) {
		t.Errorf("Check(old token) after the old secret was dropped = %v, want ErrTokenInvalid", err)
	}
	// Previous secrets are held to the same length, and bounded in number.
	if _, err := approvals.NewSigner([]byte(newSecret), []byte("short")); err == nil {
		t.Error("NewSigner with a short previous secret = nil error, want an error")
	}
	five := make([][]byte, approvals.MaxPreviousSecrets+1)
	for i := range five {
		five[i] = []byte(oldSecret)
	}
	if _, err := approvals.NewSigner([]byte(newSecret), five...); err == nil {
		t.Errorf("NewSigner with %d previous secrets = nil error, want an error", len(five))
	}
}

// TestSigner_Vectors: tokens are what toolgate has always made of a secret
// and a call, so that links, confirmation links and forms handed out by
// one replica check on every other, whatever its version.
func TestSigner_Vectors(t *testing.T) {
	s := testSigner(t, testSecret)
	c := testCall()
	for _, tc := range []struct{ name, got, want string }{
		{"Token", s.Token(c), "v1.1795990502.a3zt0rAFqUNGSd2hReyxaAwP67NYElesbbBexf7U46o"},
		{"ConfirmToken", s.ConfirmToken(c), "v1.1795990502.LKWH6qZzQU5lc-zsFVFYcEjw1PDL1HJsUrgqsPzhz8I"},
		{"FormToken", s.FormToken("alice", c.ID), "jVBTcwAJk-rqCFqai7SgqclKVLwhq8p6zO_GQogfe8g"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// BenchmarkSigner_ApprovalURL is the link every parked call is announced
// with.
func BenchmarkSigner_ApprovalURL(b *testing.B) {
	s, err := approvals.NewSigner([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	c := pending.Call{ID: "RLYOGGLFSOIJNCKHNTPSJUXSXP", RequestDigest: strings.Repeat("ab", 32), ExpiresAt: t0.Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.ApprovalURL(publicURL, c)
	}
}
