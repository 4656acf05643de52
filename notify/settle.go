package notify

import "sync/atomic"

// InFlight reports whether event e (an event with its id: the same type,
// call and, for a resolved event, end) is still queued for, or being
// delivered to, some target: Notify has taken it and not every target
// has delivered, failed or dropped it yet. A caller that announces again
// what did not settle asks this first, so that it does not queue a
// second copy behind one still being retried.
func (n *Notifier) InFlight(e Event) bool {
	id := e.id()
	n.inflightMu.Lock()
	defer n.inflightMu.Unlock()
	return n.inflight[id] > 0
}

// Room is how many more events Notify can queue for every target now:
// the free places of the fullest target, over all its lanes. A caller
// with a backlog (the re-announcer) sends no more than this, and only the
// events RoomFor has a place for, so what it sends is queued, not
// dropped.
func (n *Notifier) Room() int {
	room := n.opts.QueueSize
	for _, w := range n.workers {
		free := 0
		for _, lane := range w.lanes {
			free += cap(lane) - len(lane)
		}
		room = min(room, free)
	}
	return room
}

// RoomBytes is how many bytes of events every target can queue now: what
// MaxQueuedBytes leaves of what the fullest holds.
func (n *Notifier) RoomBytes() int64 {
	room := int64(MaxQueuedBytes)
	for _, w := range n.workers {
		room = min(room, MaxQueuedBytes-w.queuedBytes.Load())
	}
	return room
}

// RoomFor reports whether every target's lane for call callID's events
// has a free place now.
func (n *Notifier) RoomFor(callID string) bool {
	for _, w := range n.workers {
		if lane := w.lane(callID); len(lane) == cap(lane) {
			return false
		}
	}
	return true
}

// Pending is how many events Notify took that some target has not
// finished with: those InFlight reports.
func (n *Notifier) Pending() int {
	n.inflightMu.Lock()
	defer n.inflightMu.Unlock()
	return len(n.inflight)
}

// queued is an event in a target's queue, with the settlement it shares
// with its copies in the other targets' queues.
type queued struct {
	e    Event
	s    *settlement
	size int64 // what it counts against its worker's queuedBytes
	// skip is a requested event's flag: set when its call was resolved
	// before the event left the lane (unsent.go). Nil for resolved events.
	skip *atomic.Bool
}

// settlement counts the targets still to finish with one event, for
// InFlight and Options.OnSettled. It lives as long as the event is queued
// somewhere.
type settlement struct {
	id              string // the event's id, made once for every target
	remaining       atomic.Int64
	failed, dropped atomic.Bool
}

// settlement returns a fresh settlement for e, which targets targets have
// still to finish with (dropped: an earlier target dropped it), and counts
// e in flight until done has been called once per target.
func (n *Notifier) settlement(e *Event, targets int, dropped bool) *settlement {
	s := &settlement{id: e.id()}
	s.remaining.Store(int64(targets))
	s.dropped.Store(dropped)
	n.inflightMu.Lock()
	n.inflight[s.id]++
	n.inflightMu.Unlock()
	return s
}

// done records one target's final result for e (delivered, failed or
// dropped). The last target to finish calls OnSettled unless some target
// dropped e, and then takes e out of flight. The flags are stored before
// the count falls, so the last target sees every other target's result.
func (s *settlement) done(n *Notifier, e *Event, result string) {
	switch result {
	case ResultFailed:
		s.failed.Store(true)
	case ResultDropped:
		s.dropped.Store(true)
	}
	if s.remaining.Add(-1) != 0 {
		return
	}
	// OnSettled first, then out of flight: a caller that records settled
	// events sees the event in flight until it has recorded it, never
	// neither, and so never announces it again in between.
	if n.opts.OnSettled != nil && !s.dropped.Load() {
		n.opts.OnSettled(*e, !s.failed.Load())
	}
	n.inflightMu.Lock()
	if n.inflight[s.id]--; n.inflight[s.id] <= 0 {
		delete(n.inflight, s.id)
	}
	n.inflightMu.Unlock()
}
