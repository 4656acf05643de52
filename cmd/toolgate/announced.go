package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// announcedDelay is how long a settled announcement may wait to be
// recorded with the others that settle meanwhile. Recording is what keeps
// a call from being announced again (after reannounceAfter, seconds), so
// a tenth of a second changes nothing for approvers, and spares the store
// a round trip per parked call: on Redis one of the nine an ask with an
// instant approval cost.
const announcedDelay = 100 * time.Millisecond

// announcedChunk bounds the calls one store request records.
const announcedChunk = 1024

// announcements records settled notifications in batches, off the
// notification lanes: a lane no longer waits for the store before it
// sends its next event. T is what one is recorded by: a call ID for
// requested events (pending.Store.Announced), an end for resolved ones
// (pending.Store.Resolved).
type announcements[T comparable] struct {
	store func(context.Context, []T) error
	what  string // "calls" or "ends", for the log
	log   *slog.Logger
	delay time.Duration

	mu  sync.Mutex
	ids []T
	// queued holds ids, for reannounce to skip: the zero time while an id
	// waits to be recorded, then when it was recorded, for keepRecorded;
	// recorded lists the latter in that order, to forget them.
	queued   map[T]time.Time
	recorded []recordedID[T]
	stopped  bool
	kick     chan struct{} // a batch has begun
	stop     chan struct{}
	done     chan struct{}
}

// newAnnouncements batches the requested events that settle.
func newAnnouncements(store pending.Store, log *slog.Logger, delay time.Duration) *announcements[string] {
	return newBatch(store.Announced, "calls", log, delay)
}

// newResolutions batches the resolved events that settle.
func newResolutions(store pending.Store, log *slog.Logger, delay time.Duration) *announcements[pending.End] {
	return newBatch(store.Resolved, "ends", log, delay)
}

func newBatch[T comparable](store func(context.Context, []T) error, what string, log *slog.Logger, delay time.Duration) *announcements[T] {
	b := &announcements[T]{
		store: store, what: what, log: log, delay: delay, queued: map[T]time.Time{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go b.run()
	return b
}

// add queues id to be recorded as settled. After Close it records it
// at once.
func (b *announcements[T]) add(id T) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		b.record([]T{id})
		return
	}
	b.ids = append(b.ids, id)
	b.queued[id] = time.Time{}
	first := len(b.ids) == 1
	b.mu.Unlock()
	if first {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

type recordedID[T comparable] struct {
	id T
	at time.Time
}

// keepRecorded is how long an id stays in queued once recorded: a resend
// round that listed it before it was recorded (a round lasts at most 5 s)
// still skips it. A variable so that tests need not wait it out.
var keepRecorded = 10 * time.Second

// queuedFor reports whether id waits to be recorded, or was recorded
// lately: its announcement settled, so it is not announced again.
func (b *announcements[T]) queuedFor(id T) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.queued[id]
	return ok && (at.IsZero() || time.Since(at) < keepRecorded)
}

func (b *announcements[T]) run() {
	defer close(b.done)
	for {
		select {
		case <-b.stop:
			return
		case <-b.kick:
		}
		select {
		case <-b.stop:
			return // Close records what is queued
		case <-time.After(b.delay):
		}
		b.flush()
	}
}

// flush records every queued id.
func (b *announcements[T]) flush() {
	b.mu.Lock()
	ids := b.ids
	b.ids = nil
	b.mu.Unlock()
	for chunk := range slices.Chunk(ids, announcedChunk) {
		b.record(chunk)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	n := 0
	for _, r := range b.recorded {
		if now.Sub(r.at) < keepRecorded {
			break
		}
		if b.queued[r.id] == r.at { // not queued again since
			delete(b.queued, r.id)
		}
		n++
	}
	b.recorded = slices.Delete(b.recorded, 0, n)
	for _, id := range ids {
		if at, ok := b.queued[id]; ok && at.IsZero() {
			b.queued[id] = now
			b.recorded = append(b.recorded, recordedID[T]{id, now})
		}
	}
}

func (b *announcements[T]) record(ids []T) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := contextTimeout(announcedTimeout)
	defer cancel()
	if err := b.store(ctx, ids); err != nil {
		b.log.Warn("could not record notifications as settled; they will be sent again", b.what, len(ids), "error", err)
	}
}

// Close records what is queued; later announcements are recorded one by
// one as they settle.
func (b *announcements[T]) Close(context.Context) error {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
	b.flush()
	return nil
}
