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

// TestOrOwn: given keys are kept as they are; without any, each call
// gives one random key of its own.
func TestOrOwn(t *testing.T) {
	given := [][]byte{[]byte("k1"), []byte("k2")}
	if got := OrOwn(given); len(got) != 2 || &got[0] != &given[0] {
		t.Errorf("OrOwn(two keys) = %q, want them", got)
	}
	a, b := OrOwn(nil), OrOwn(nil)
	if len(a) != 1 || len(a[0]) != 32 || len(b) != 1 || bytes.Equal(a[0], b[0]) {
		t.Errorf("OrOwn(nil) = %x, %x; want one random 32-byte key each", a, b)
	}
}
