package pending

import (
	"container/list"
	"context"
	"slices"
	"sync"
	"time"
)

var _ Listings = (*MemoryStore)(nil)

// memListings are the listings of a MemoryStore, with a mutex of their
// own: they never touch parked calls. Its zero value is ready for use.
// At most maxListingUpstreams upstreams and MaxListedTools tools each.
// A tool goes ListingTTL after its last write: it is no longer recalled,
// and a Remember of its upstream drops it (at most maxListingDrops at a
// time, oldest first). An upstream goes ListingTTL after its last write,
// dropped when met or when room is needed for another upstream.
type memListings struct {
	mu sync.Mutex
	by map[string]*memListing // upstream -> its entries
}

type memListing struct {
	tools   map[string]*list.Element // tool -> its *memTool in bySeen
	bySeen  list.List                // of *memTool, the least recently written first
	expires time.Time
}

type memTool struct {
	name  string
	value []byte
	seen  time.Time // its last write
}

// Remember implements [Listings.Remember].
func (s *MemoryStore) Remember(ctx context.Context, upstream string, entries map[string][]byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	entries = keptListings(upstream, entries)
	if len(entries) == 0 {
		return 0, nil
	}
	ls := &s.listings
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := s.now()
	l := ls.live(upstream, now)
	if l == nil {
		if ls.by == nil {
			ls.by = make(map[string]*memListing)
		}
		if len(ls.by) >= maxListingUpstreams {
			for u, o := range ls.by {
				if !now.Before(o.expires) {
					delete(ls.by, u)
				}
			}
			if len(ls.by) >= maxListingUpstreams {
				return 0, nil
			}
		}
		l = &memListing{tools: make(map[string]*list.Element, len(entries))}
		ls.by[upstream] = l
	}
	l.dropLapsed(now)
	kept := 0
	for tool, v := range entries {
		v = slices.Clone(v) // not the caller's slice
		if e, known := l.tools[tool]; known {
			t := e.Value.(*memTool)
			t.value, t.seen = v, now
			l.bySeen.MoveToBack(e)
		} else if len(l.tools) < MaxListedTools {
			l.tools[tool] = l.bySeen.PushBack(&memTool{name: tool, value: v, seen: now})
		} else {
			continue
		}
		kept++
	}
	if kept > 0 {
		l.expires = now.Add(ListingTTL)
	}
	return kept, nil
}

// dropLapsed drops up to maxListingDrops tools not written for
// ListingTTL, oldest first. bySeen is in the order of the writes, made
// under the mutex with a clock that does not go back.
func (l *memListing) dropLapsed(now time.Time) {
	for range maxListingDrops {
		e := l.bySeen.Front()
		if e == nil || !e.Value.(*memTool).lapsed(now) {
			return
		}
		delete(l.tools, e.Value.(*memTool).name)
		l.bySeen.Remove(e)
	}
}

// lapsed reports whether t was last written ListingTTL or more before now.
func (t *memTool) lapsed(now time.Time) bool { return !now.Before(t.seen.Add(ListingTTL)) }

// Recall implements [Listings.Recall].
func (s *MemoryStore) Recall(ctx context.Context, upstream, tool string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ls := &s.listings
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := s.now()
	if l := ls.live(upstream, now); l != nil {
		if e, ok := l.tools[tool]; ok && !e.Value.(*memTool).lapsed(now) {
			return slices.Clone(e.Value.(*memTool).value), nil
		}
	}
	return nil, listingMiss{upstream: upstream, tool: tool}
}

// live is upstream's listing unless it has lapsed (then it is dropped).
func (ls *memListings) live(upstream string, now time.Time) *memListing {
	l := ls.by[upstream]
	if l != nil && !now.Before(l.expires) {
		delete(ls.by, upstream)
		return nil
	}
	return l
}
