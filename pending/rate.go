package pending

import (
	"fmt"
	"time"
)

// The rate of parks per principal (Options.ParkEvery, Options.ParkBurst)
// is a generic cell rate algorithm: each principal has a theoretical
// arrival time, tat, which every new call it parks moves ParkEvery later
// (from now, when tat is past). A new call is let in while tat is at most
// (ParkBurst-1)·ParkEvery ahead of now: a principal that has not parked
// for a while may park ParkBurst calls at once, then one per ParkEvery.
// One timestamp per principal, and no timer: RedisStore keeps it in a key
// of the principal's slot, read and moved by the park script, so that the
// rate holds across replicas; MemoryStore in a map.

// RateError is the ErrTooMany of a principal that parks new calls faster
// than Options.ParkEvery allows: RetryAfter is when its next new call
// would be let in. errors.Is(err, ErrTooMany) holds.
type RateError struct {
	ID, Principal string
	Burst         int
	Every         time.Duration
	RetryAfter    time.Duration
}

func (e *RateError) Error() string {
	return fmt.Sprintf("%v: parking %s: principal %q parks more often than %d at once and one every %v; next in %v",
		ErrTooMany, e.ID, e.Principal, e.Burst, e.Every, e.RetryAfter)
}

// Is makes errors.Is(err, ErrTooMany) true.
func (e *RateError) Is(target error) bool { return target == ErrTooMany }

// memRates is MemoryStore's record of the principals' arrival times.
// Entries in the past say nothing more than an absent one: they are
// dropped once the map has doubled since the last such sweep, so it holds
// at most about twice the principals that parked within the last
// ParkBurst·ParkEvery.
type memRates struct {
	tat     map[string]time.Time
	sweepAt int
}

// take lets principal park a new call now and records it, or returns a
// *RateError and records nothing. The memory store parks whatever take
// lets in, so the check and the record are one step, as in the script.
func (r *memRates) take(id, principal string, every time.Duration, burst int, now time.Time) error {
	if every <= 0 || principal == "" {
		return nil
	}
	tat := r.tat[principal]
	if tat.Before(now) {
		tat = now
	}
	if ahead := tat.Sub(now) - time.Duration(burst-1)*every; ahead > 0 {
		return &RateError{ID: id, Principal: principal, Burst: burst, Every: every, RetryAfter: ahead}
	}
	if r.tat == nil {
		r.tat = make(map[string]time.Time)
	}
	r.tat[principal] = tat.Add(every)
	if len(r.tat) >= r.sweepAt {
		for p, t := range r.tat {
			if !t.After(now) {
				delete(r.tat, p)
			}
		}
		r.sweepAt = 2*len(r.tat) + 64
	}
	return nil
}
