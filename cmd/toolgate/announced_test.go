package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// recordedAnnounced is a memory store that keeps every Announced request.
type recordedAnnounced struct {
	*pending.MemoryStore
	mu       sync.Mutex
	requests [][]string
}

func (s *recordedAnnounced) Announced(ctx context.Context, ids []string) error {
	s.mu.Lock()
	s.requests = append(s.requests, slices.Clone(ids))
	s.mu.Unlock()
	return s.MemoryStore.Announced(ctx, ids)
}

func (s *recordedAnnounced) recorded() (requests int, ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		ids = append(ids, r...)
	}
	return len(s.requests), ids
}

// TestAnnouncementsBatched: announcements that settle together are
// recorded in one store request, each once; until then, and for
// keepRecorded after (a resend round may have listed them before they
// were recorded), reannounce sees them as queued; Close records what is
// left, and what settles after it is recorded at once.
func TestAnnouncementsBatched(t *testing.T) {
	defer func(d time.Duration) { keepRecorded = d }(keepRecorded)
	keepRecorded = time.Second
	st := &recordedAnnounced{MemoryStore: pending.NewMemory(pending.Options{})}
	log := slog.New(slog.DiscardHandler)
	b := newAnnouncements(st, log, 200*time.Millisecond)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	var want []string
	for i := range 50 {
		id := fmt.Sprint("call-", i)
		b.add(id)
		want = append(want, id)
	}
	if !b.queuedFor("call-7") {
		t.Error("a settled announcement is not queued before it is recorded")
	}
	testkit.WaitFor(t, "the batch to be recorded", func() bool { _, ids := st.recorded(); return len(ids) == 50 })
	if n, ids := st.recorded(); n != 1 || !slices.Equal(ids, want) {
		t.Errorf("%d store requests recorded %v, want one with the 50 calls", n, ids)
	}
	recordedAt := time.Now()
	if !b.queuedFor("call-7") {
		t.Error("a call just recorded is not skipped")
	}
	testkit.WaitFor(t, "the recorded calls to leave the queue", func() bool { return !b.queuedFor("call-7") })
	if d := time.Since(recordedAt); d < keepRecorded/2 {
		t.Errorf("a recorded call left the queue after %v, want about %v", d, keepRecorded)
	}
	// The next batch forgets them.
	b.add("call-50")
	testkit.WaitFor(t, "the next batch", func() bool { _, ids := st.recorded(); return len(ids) == 51 })
	testkit.WaitFor(t, "the map to forget the first batch", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		_, kept := b.queued["call-7"]
		return !kept && len(b.queued) == 1
	})

	b = newAnnouncements(st, log, time.Hour) // only Close records now
	b.add("late-1")
	b.add("late-2")
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ids := st.recorded(); !slices.Equal(ids[51:], []string{"late-1", "late-2"}) {
		t.Errorf("Close recorded %v, want the two queued", ids[51:])
	}
	b.add("after-close")
	if n, ids := st.recorded(); n != 4 || ids[len(ids)-1] != "after-close" {
		t.Errorf("after Close: %d requests, last %v; want the call recorded at once", n, ids[len(ids)-1])
	}
}
