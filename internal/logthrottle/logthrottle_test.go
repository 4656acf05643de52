package logthrottle

import (
	"fmt"
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	th := NewClock(time.Second, func() time.Time { return now })
	if ok, n := th.Allow("a"); !ok || n != 0 {
		t.Fatalf("first line: %v %d", ok, n)
	}
	for range 5 {
		if ok, _ := th.Allow("a"); ok {
			t.Fatal("a line within the interval was let through")
		}
	}
	if ok, _ := th.Allow("b"); !ok {
		t.Fatal("another key's first line was held back")
	}
	now = now.Add(time.Second)
	if ok, n := th.Allow("a"); !ok || n != 5 {
		t.Fatalf("after the interval: %v, %d suppressed; want true, 5", ok, n)
	}
	// Keys are bounded: a flood of distinct keys keeps at most MaxKeys.
	for i := range 3 * MaxKeys {
		th.Allow(fmt.Sprint("k", i))
	}
	if len(th.keys) > MaxKeys {
		t.Errorf("%d keys remembered, want at most %d", len(th.keys), MaxKeys)
	}
}
