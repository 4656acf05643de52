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

	mu      sync.Mutex
	ids     []T
	queued  map[T]bool // ids, for reannounce to skip
	stopped bool
	kick    chan struct{} // a batch has begun
	stop    chan struct{}
	done    chan struct{}
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
		store: store, what: what, log: log, delay: delay, queued: map[T]bool{},
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
	b.queued[id] = true
	first := len(b.ids) == 1
	b.mu.Unlock()
	if first {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// queuedFor reports whether id waits to be recorded: its announcement
// settled, so it is not announced again.
func (b *announcements[T]) queuedFor(id T) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queued[id]
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
	for _, id := range ids {
		delete(b.queued, id)
	}
	b.mu.Unlock()
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
