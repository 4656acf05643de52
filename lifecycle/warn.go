package lifecycle

import (
	"sync"
	"time"
)

// sweepWarnEvery bounds the sweeper's repeated warnings: a store that is
// down fails every round (several a second), and one line per interval
// says as much, with the number of rounds left out.
var sweepWarnEvery = 30 * time.Second

// throttle remembers when each warning was last written.
type throttle struct {
	mu      sync.Mutex
	last    map[string]time.Time
	dropped map[string]int
}

// warn writes msg at warning level unless it was written less than
// sweepWarnEvery ago.
func (l *Lifecycle) warn(msg string, args ...any) {
	t := &l.warned
	t.mu.Lock()
	if t.last == nil {
		t.last, t.dropped = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if last, ok := t.last[msg]; ok && now.Sub(last) < sweepWarnEvery {
		t.dropped[msg]++
		t.mu.Unlock()
		return
	}
	dropped := t.dropped[msg]
	t.last[msg], t.dropped[msg] = now, 0
	t.mu.Unlock()
	l.log.Warn(msg, append(args, "suppressed_since_last", dropped)...)
}
