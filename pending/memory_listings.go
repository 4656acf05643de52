package pending

import (
	"context"
	"slices"
	"sync"
	"time"
)

var _ Listings = (*MemoryStore)(nil)

// memListings are the listings of a MemoryStore, with a mutex of their
// own: they never touch parked calls. Its zero value is ready for use.
// At most maxListingUpstreams upstreams and MaxListedTools tools each;
// an upstream's entries go ListingTTL after its last write, dropped when
// met or when room is needed for another upstream.
type memListings struct {
	mu sync.Mutex
	by map[string]*memListing // upstream -> its entries
}

type memListing struct {
	tools   map[string][]byte
	expires time.Time
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
		l = &memListing{tools: make(map[string][]byte, len(entries))}
		ls.by[upstream] = l
	}
	kept := 0
	for tool, v := range entries {
		if _, known := l.tools[tool]; !known && len(l.tools) >= MaxListedTools {
			continue
		}
		l.tools[tool] = slices.Clone(v) // not the caller's slice
		kept++
	}
	l.expires = now.Add(ListingTTL)
	return kept, nil
}

// Recall implements [Listings.Recall].
func (s *MemoryStore) Recall(ctx context.Context, upstream, tool string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ls := &s.listings
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.live(upstream, s.now()); l != nil {
		if v, ok := l.tools[tool]; ok {
			return slices.Clone(v), nil
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
