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
// recorded in one store request, each once; until then reannounce sees
// them as queued, and after it only while a resend round that began
// before runs (it may have listed them before they were recorded), so
// the batch keeps no memory of the calls it recorded; Close records what
// is left, and what settles after it is recorded at once.
func TestAnnouncementsBatched(t *testing.T) {
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
	testkit.WaitFor(t, "the recorded calls to leave the queue", func() bool { return !b.queuedFor("call-7") })
	if n := queuedLen(b); n != 0 {
		t.Errorf("%d calls kept once recorded, with no resend round running; want none", n)
	}

	// A round that began before they are recorded skips them till it ends,
	// also when one is queued again meanwhile.
	end := b.round()
	b.add("call-50")
	b.add("call-51")
	testkit.WaitFor(t, "the next batch", func() bool { _, ids := st.recorded(); return len(ids) == 52 })
	b.add("call-51")
	testkit.WaitFor(t, "the repeat", func() bool { _, ids := st.recorded(); return len(ids) == 53 })
	for _, id := range []string{"call-50", "call-51"} {
		if !b.queuedFor(id) {
			t.Errorf("%s, recorded while a round runs, is not skipped by it", id)
		}
	}
	b.add("call-52")
	end()
	if b.queuedFor("call-50") || b.queuedFor("call-51") {
		t.Error("recorded calls still skipped after the round ended")
	}
	if !b.queuedFor("call-52") {
		t.Error("a call not yet recorded is not skipped after a round ended")
	}
	testkit.WaitFor(t, "the last batch", func() bool { return queuedLen(b) == 0 })

	b = newAnnouncements(st, log, time.Hour) // only Close records now
	b.add("late-1")
	b.add("late-2")
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ids := st.recorded(); !slices.Equal(ids[54:], []string{"late-1", "late-2"}) {
		t.Errorf("Close recorded %v, want the two queued", ids[54:])
	}
	b.add("after-close")
	if n, ids := st.recorded(); n != 6 || ids[len(ids)-1] != "after-close" {
		t.Errorf("after Close: %d requests, last %v; want the call recorded at once", n, ids[len(ids)-1])
	}
}

func queuedLen[T comparable](b *announcements[T]) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queued)
}
