package pending

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkMemorySweepRound is one round of the sweeper's reads (Expire,
// and Approved twice) on a MemoryStore that keeps 100,000 finished calls
// (as it does for ResultTTL) beside 100 waiting ones: the cost of a
// round under the store's lock.
func BenchmarkMemorySweepRound(b *testing.B) {
	s := NewMemory(Options{})
	ctx := context.Background()
	for i := range 100_100 {
		c := sampleCall()
		c.ID, c.ArgsKey = "c"+strconv.Itoa(i), ""
		if _, _, err := s.Park(ctx, c, time.Hour); err != nil {
			b.Fatal(err)
		}
		if i < 100_000 {
			if _, err := s.Decide(ctx, c.ID, Decision{To: Rejected, By: "bench"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Expire(ctx, 100); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Approved(ctx, 0, 20); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Approved(ctx, 3*time.Second, 20); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMemoryDropQueue: moving a call's forget time many times leaves the
// queue bounded (stale entries are dropped by a rebuild), and the call is
// forgotten at its last forget time, not at a stale one.
func TestMemoryDropQueue(t *testing.T) {
	start := time.Now()
	now := start
	s := NewMemory(Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	c := park(t, s, sampleCall(), time.Hour)
	if _, err := s.Decide(ctx, c.ID, Decision{To: Rejected, By: "bob"}); err != nil {
		t.Fatal(err) // finished: only retention moves it now
	}
	s.mu.Lock()
	m := s.calls[c.ID]
	for i := range 1000 {
		s.dropAt(m, start.Add(time.Duration(1000-i)*time.Minute))
	}
	s.dropAt(m, start.Add(2*time.Hour))
	n := len(s.drops)
	s.mu.Unlock()
	if n > 65 {
		t.Errorf("the drop queue holds %d entries for one call, want it bounded", n)
	}
	now = start.Add(2*time.Hour - time.Second)
	if _, err := s.Expire(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, c.ID); err != nil {
		t.Errorf("the call was forgotten at a stale time: %v", err)
	}
	now = start.Add(2 * time.Hour)
	if _, err := s.Expire(ctx, 100); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	_, kept := s.calls[c.ID]
	s.mu.Unlock()
	if kept {
		t.Error("the call was not forgotten at its forget time")
	}
}
