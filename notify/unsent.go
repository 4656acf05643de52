package notify

import (
	"sync"
	"sync/atomic"
)

// A call resolved before its requested event's turn came on a target needs
// no message there at all: nobody on that target has seen the ask, and the
// call no longer waits. Both events are then skipped for that target
// (ResultSkipped, settled as delivered), so an agent that parks and cancels
// in a loop costs the approvers' channel what the channel can take, not two
// messages a round: the queue that builds up behind a slow receiver (Slack
// takes about one message a second) is mostly calls already gone.

// unsent holds, for one target, the requested events queued and not yet
// taken for delivery, by call ID: at most as many as its lanes hold.
type unsent struct {
	mu sync.Mutex
	m  map[string]*atomic.Bool // the event's skip flag
}

// add records a requested event of callID about to be queued and returns
// its skip flag.
func (u *unsent) add(callID string) *atomic.Bool {
	f := new(atomic.Bool)
	u.mu.Lock()
	if u.m == nil {
		u.m = map[string]*atomic.Bool{}
	}
	u.m[callID] = f
	u.mu.Unlock()
	return f
}

// take is called when the event whose flag is f leaves its lane (or could
// not be queued): it is no longer there to skip. It reports whether the
// event is to be skipped.
func (u *unsent) take(callID string, f *atomic.Bool) (skip bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[callID] == f {
		delete(u.m, callID)
	}
	return f.Load()
}

// supersede is called with a resolved event of callID: when that call's
// requested event is still queued, it is marked skipped and supersede
// reports true, and the resolved event is not sent either.
func (u *unsent) supersede(callID string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := u.m[callID]
	if f == nil {
		return false
	}
	f.Store(true)
	delete(u.m, callID)
	return true
}
