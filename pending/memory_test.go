package pending

import (
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// newMemoryStore returns a MemoryStore on a clock that only moves when the
// test says so.
func newMemoryStore(t *testing.T, with ...func(*Options)) (Store, func(time.Duration)) {
	t.Helper()
	clock := testkit.NewClock(time.Now())
	opts := contractOptions(with)
	opts.Now = clock.Now
	return NewMemory(opts), clock.Advance
}

func TestMemoryStore(t *testing.T)     { testStore(t, newMemoryStore) }
func TestMemoryStoreRace(t *testing.T) { testStoreRace(t, newMemoryStore) }
