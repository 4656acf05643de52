package pending

import (
	"sync"
	"sync/atomic"
	"testing"
)

// testNonces checks FirstUse: first use once, again after the ttl, once
// among concurrent callers, and on every replica of the store.
func testNonces(t *testing.T, newStore newStoreFunc) {
	s, advance := newStore(t)
	n := s.(Nonces)
	ctx := t.Context()
	if first, err := n.FirstUse(ctx, "sig-a", short); err != nil || !first {
		t.Fatalf("first use = %v, %v", first, err)
	}
	if first, err := n.FirstUse(ctx, "sig-a", short); err != nil || first {
		t.Fatalf("second use = %v, %v; want a replay", first, err)
	}
	if first, _ := n.FirstUse(ctx, "sig-b", short); !first {
		t.Fatal("another key was taken for a replay")
	}
	advance(beyond)
	if first, _ := n.FirstUse(ctx, "sig-a", short); !first {
		t.Fatal("a key was still remembered after its ttl")
	}
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if first, err := n.FirstUse(ctx, "sig-race", long); err == nil && first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if firsts.Load() != 1 {
		t.Fatalf("8 concurrent first uses: %d firsts, want 1", firsts.Load())
	}
	for _, bad := range []string{"", string(make([]byte, maxNonceBytes+1))} {
		if _, err := n.FirstUse(ctx, bad, short); err == nil {
			t.Errorf("FirstUse(%d-byte key) succeeded", len(bad))
		}
	}
}
