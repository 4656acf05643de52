package pending

import (
	"sync"
	"testing"
	"time"
)

// newMemoryStore returns a MemoryStore on a clock that only moves when the
// test says so.
func newMemoryStore(t *testing.T) (Store, func(time.Duration)) {
	t.Helper()
	clock := &fakeClock{now: time.Now()}
	return NewMemory(Options{ResultTTL: contractResultTTL, Now: clock.Now}), clock.Advance
}

func TestMemoryStore(t *testing.T)     { testStore(t, newMemoryStore) }
func TestMemoryStoreRace(t *testing.T) { testStoreRace(t, newMemoryStore) }

// fakeClock is a clock for concurrent use that moves only by Advance.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
