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
	// queued holds the ids reannounce skips, with how many times each
	// waits in ids to be recorded. An id recorded while a resend round
	// runs stays, at 0, until no round runs (rounds), since the round may
	// have listed it before it was recorded; recorded lists those, to
	// forget them then. Otherwise an id is forgotten as soon as it is
	// recorded: a round that lists later finds it recorded in the store.
	// So the map holds what is queued and what a round may still see
	// unrecorded, not every call of the last seconds: at a few thousand
	// asks a second that was megabytes the collector marked on every cycle.
	queued   map[T]int32
	recorded []T
	rounds   int
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
		store: store, what: what, log: log, delay: delay, queued: map[T]int32{},
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
	b.queued[id]++
	first := len(b.ids) == 1
	b.mu.Unlock()
	if first {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// queuedFor reports whether id waits to be recorded, or was recorded
// while a resend round runs: its announcement settled, so it is not
// announced again.
func (b *announcements[T]) queuedFor(id T) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.queued[id]
	return ok
}

// round marks a resend round, from before it lists what is due: an id
// recorded meanwhile stays queued until the round ends, since the list
// may hold it as not recorded. It returns the round's end.
func (b *announcements[T]) round() (end func()) {
	b.mu.Lock()
	b.rounds++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.rounds--; b.rounds > 0 {
			return
		}
		for _, id := range b.recorded {
			if n, ok := b.queued[id]; ok && n == 0 { // not queued again since
				delete(b.queued, id)
			}
		}
		b.recorded = nil
	}
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
	for _, id := range ids {
		switch n := b.queued[id]; {
		case n > 1: // queued again meanwhile, for a later batch
			b.queued[id] = n - 1
		case b.rounds > 0:
			b.queued[id] = 0
			b.recorded = append(b.recorded, id)
		default:
			delete(b.queued, id)
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
