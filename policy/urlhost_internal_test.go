package policy

import (
	"math/rand/v2"
	"testing"
)

// TestPlainHostNeedsNoMapping: a host plainHost lets skip the lookup
// mapping is one the mapping would leave as it is, and names ending in a
// number still read as IPv4.
func TestPlainHostNeedsNoMapping(t *testing.T) {
	const chars = "abz09-_."
	r := rand.New(rand.NewPCG(1, 2))
	hosts := []string{"evil.com", "a_b.example", "-a.evil.com", "ab--c.evil.com", "x-", "0x7f.1", "127.0.0.1", "2130706433"}
	for range 5000 {
		b := make([]byte, 1+r.IntN(12))
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		hosts = append(hosts, string(b))
	}
	for _, h := range hosts {
		if !plainHost(h) {
			continue
		}
		if mapped, err := hostProfile.ToASCII(h); err != nil || mapped != h {
			t.Errorf("%q: plain, but the mapping gives %q, %v", h, mapped, err)
		}
	}
	if a, _, ok := canonicalHost("0x7f.1"); !ok || a != "127.0.0.1" {
		t.Errorf("0x7f.1: %q, %v; want 127.0.0.1", a, ok)
	}
}
