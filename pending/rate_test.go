package pending

import (
	"strconv"
	"testing"
	"time"
)

// TestMemRatesBounded: the memory store's arrival times stay bounded by
// the principals that parked lately, not by all that ever parked.
func TestMemRatesBounded(t *testing.T) {
	var r memRates
	now := time.Unix(1_000_000, 0)
	for i := range 100_000 {
		now = now.Add(10 * time.Millisecond)
		p := "key:" + strconv.Itoa(i)
		if err := r.take("c", p, 100*time.Millisecond, 1, now); err != nil {
			t.Fatal(err)
		}
		// About 10 principals parked within the last 100 ms: the map
		// holds them, and what arrived since the last sweep.
		if len(r.tat) > 2*10+64 {
			t.Fatalf("after %d principals the map holds %d", i+1, len(r.tat))
		}
	}
}
