package gctune

import (
	"errors"
	"math"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// MemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to 90%
// of the memory limit of the container toolgate runs in (its cgroup's, v1
// or v2), and returns the limit in force (0: none).
//
// Without it the collector lets the heap grow to twice the live heap
// whatever the container allows: a replica whose live heap is within its
// limit (the bounded queues of a stuck notification receiver, bodies being
// read) is killed at the doubling. With it the collector works harder as
// the heap nears the limit instead. GOMEMLIMIT in the environment wins,
// and AUTOMEMLIMIT sets another share ("off" turns this off), as
// automemlimit reads them.
func MemoryLimit() (int64, error) {
	return memoryLimit(memlimit.FromCgroup)
}

func memoryLimit(provider memlimit.Provider) (int64, error) {
	limit, err := memlimit.Set(memlimit.WithProvider(provider))
	if errors.Is(err, memlimit.ErrCgroupsNotSupported) {
		err = nil // not Linux: no container to read
	}
	if limit == math.MaxInt64 {
		limit = 0
	}
	return limit, err
}
