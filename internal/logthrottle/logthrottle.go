// Package logthrottle bounds repeated log lines: a warning that a caller
// can make happen on every request (a hook that fails, a store that is
// down) is written once per interval per key, with how many were left out
// since, so that no caller sets the log's volume.
package logthrottle

import (
	"sync"
	"time"
)

// MaxKeys bounds the keys a Throttle remembers; past it, the oldest
// interval's keys are forgotten (their next line is written).
const MaxKeys = 1024

// Throttle lets one line per key through every interval given to New. The zero value is
// not usable; make one with New. It is safe for concurrent use.
type Throttle struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	last    time.Time
	dropped int
}

// New returns a Throttle that lets one line per key through every every.
func New(every time.Duration) *Throttle { return NewClock(every, time.Now) }

// NewClock is New with the time read from now, for tests that step it.
func NewClock(every time.Duration, now func() time.Time) *Throttle {
	return &Throttle{every: every, now: now, keys: map[string]*entry{}}
}

// Allow reports whether a line for key is to be written now and, if so,
// how many lines for key were held back since the last one written.
func (t *Throttle) Allow(key string) (ok bool, suppressed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.keys[key]
	if e != nil && now.Sub(e.last) < t.every {
		e.dropped++
		return false, 0
	}
	if e == nil {
		if len(t.keys) >= MaxKeys {
			t.forgetOld(now)
		}
		e = &entry{}
		t.keys[key] = e
	}
	suppressed = e.dropped
	e.last, e.dropped = now, 0
	return true, suppressed
}

// forgetOld drops the keys whose last line is an interval old, or all of
// them when none is.
func (t *Throttle) forgetOld(now time.Time) {
	for k, e := range t.keys {
		if now.Sub(e.last) >= t.every {
			delete(t.keys, k)
		}
	}
	if len(t.keys) >= MaxKeys {
		clear(t.keys)
	}
}
