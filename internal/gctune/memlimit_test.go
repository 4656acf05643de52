package gctune

import (
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestMemoryLimit: a container's limit sets the runtime's memory limit to
// 90% of it; GOMEMLIMIT in the environment, or no limit, leaves it as it
// is.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "")
	got, err := memoryLimit(memlimit.Limit(1000 << 20))
	if err != nil || got != 900<<20 || debug.SetMemoryLimit(-1) != 900<<20 {
		t.Fatalf("a 1000 MiB container: %d, %v, runtime limit %d; want 900 MiB", got, err, debug.SetMemoryLimit(-1))
	}

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "123MiB")
	if _, err := memoryLimit(memlimit.Limit(1000 << 20)); err != nil || debug.SetMemoryLimit(-1) != before {
		t.Errorf("with GOMEMLIMIT set: %v, runtime limit %d; want it left at %d", err, debug.SetMemoryLimit(-1), before)
	}

	t.Setenv("GOMEMLIMIT", "")
	if got, err := memoryLimit(func() (uint64, error) { return 0, memlimit.ErrNoLimit }); err != nil || got != 0 {
		t.Errorf("no limit: %d, %v; want 0", got, err)
	}
}
