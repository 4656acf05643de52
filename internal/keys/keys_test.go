package keys

import (
	"bytes"
	"testing"
)

// TestDerive: one secret and label give one key on every replica; another
// label or another secret gives another, and none is the secret itself.
func TestDerive(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, again := Derive(secret, "toolgate parked call seal v1"), Derive(secret, "toolgate parked call seal v1")
	if !bytes.Equal(a, again) || len(a) != 32 {
		t.Fatalf("two derivations differ, or are not 32 bytes: %x %x", a, again)
	}
	for name, other := range map[string][]byte{
		"another label":  Derive(secret, "toolgate remembered grant seal v1"),
		"another secret": Derive([]byte("fedcba9876543210fedcba9876543210"), "toolgate parked call seal v1"),
		"the secret":     secret,
	} {
		if bytes.Equal(a, other) {
			t.Errorf("%s gives the same key", name)
		}
	}
}
