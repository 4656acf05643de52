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

// announcements records settled announcements in batches
// (pending.Store.Announced), off the notification lanes: a lane no longer
// waits for the store before it sends its next event.
type announcements struct {
	store pending.Store
	log   *slog.Logger
	delay time.Duration

	mu      sync.Mutex
	ids     []string
	queued  map[string]bool // ids, for reannounce to skip
	stopped bool
	kick    chan struct{} // a batch has begun
	stop    chan struct{}
	done    chan struct{}
}

func newAnnouncements(store pending.Store, log *slog.Logger, delay time.Duration) *announcements {
	b := &announcements{
		store: store, log: log, delay: delay, queued: map[string]bool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go b.run()
	return b
}

// add queues id to be recorded as announced. After Close it records it
// at once.
func (b *announcements) add(id string) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		b.record([]string{id})
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
func (b *announcements) queuedFor(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queued[id]
}

func (b *announcements) run() {
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
func (b *announcements) flush() {
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

func (b *announcements) record(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := contextTimeout(announcedTimeout)
	defer cancel()
	if err := b.store.Announced(ctx, ids); err != nil {
		b.log.Warn("could not record calls as announced; they will be announced again", "calls", len(ids), "error", err)
	}
}

// Close records what is queued; later announcements are recorded one by
// one as they settle.
func (b *announcements) Close(context.Context) error {
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
