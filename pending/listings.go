package pending

import (
	"context"
	"fmt"
	"time"
)

// Shared tool listings. What a replica learns from an upstream's listing
// of its tools (for MCP: what tools/list answered) decides how later calls
// of those tools are checked; kept in the store, every replica checks a
// call the same way, whichever replica relayed the listing. The store only
// keeps opaque bytes per (upstream, tool), the proxy's encoding: it knows
// nothing of what they mean.

// Listings keeps what replicas learned from listings. Both stores
// implement it, safe for concurrent use.
//
// Each tool's entry lasts ListingTTL after the last Remember that wrote
// it, whatever else of its upstream is remembered: a tool no listing
// mentions any more is forgotten, and so is an upstream nobody lists any
// more. Listings come in pages, one Remember per page, so Remember never
// takes the tools it is not given for gone: they lapse on their own.
// A tool past its lifetime may still be recalled until a later Remember
// of its upstream drops it (each drops at most maxListingDrops, the
// oldest first) and, for a full upstream, the room it held is free again
// once it is dropped.
type Listings interface {
	// Remember keeps entries (tool name -> bytes) for upstream, each
	// replacing what the tool had, in one atomic step. An entry that
	// CheckListing refuses is skipped, and so is a tool new to upstream
	// once MaxListedTools tools are kept for it (those past their
	// lifetime that this Remember drops first no longer count); the
	// others are kept, each seen now.
	// It returns how many entries it kept. An error means nothing
	// is known to have been kept.
	Remember(ctx context.Context, upstream string, entries map[string][]byte) (int, error)

	// Recall returns what tool of upstream has, or ErrNotFound. It only
	// reads, in one round trip.
	Recall(ctx context.Context, upstream, tool string) ([]byte, error)
}

// Bounds of listings, the same for every store.
const (
	// ListingTTL is how long a tool's entry lasts after the last write
	// of it. A day: every client lists the tools when it starts and the
	// proxy rewrites its entries at least every ListingRefresh, so the
	// entries of tools still listed never lapse; a tool no listing
	// mentions any more is forgotten a day after it was last listed,
	// and so are the entries of an upstream taken out of service,
	// without anyone deleting them.
	ListingTTL = 24 * time.Hour
	// ListingRefresh is how often a writer should rewrite each tool's
	// entry, changed or not, to keep it from lapsing: well within
	// ListingTTL. Each tool's: a listing comes in pages, and rewriting
	// the tools of one page leaves the others to lapse.
	ListingRefresh = ListingTTL / 4
	// MaxListedTools caps the tools kept per upstream: an upstream that
	// lists ever new names must not grow the store without end.
	MaxListedTools = 10000
	// MaxListingBytes caps one entry. What a proxy keeps of a tool (its
	// hints and a few argument paths) is small; with the cap, an
	// upstream's entries stay under MaxListedTools × 16 KiB.
	MaxListingBytes = 16 << 10
	// MaxListingNameBytes caps an upstream's and a tool's name.
	MaxListingNameBytes = 1024
	// maxListingDrops caps the lapsed tools one Remember drops, so that
	// its work stays bounded; the rest go at the upstream's next ones.
	maxListingDrops = 1000
	// maxListingUpstreams caps the upstreams a MemoryStore keeps entries
	// for (a Redis store's keys expire by themselves).
	maxListingUpstreams = 1024
)

// CheckListing reports whether Remember keeps an entry: upstream and tool
// are non-empty with at most MaxListingNameBytes bytes, and value has at
// most MaxListingBytes.
func CheckListing(upstream, tool string, value []byte) error {
	if err := checkListingNames(upstream, tool); err != nil {
		return err
	}
	if len(value) > MaxListingBytes {
		return fmt.Errorf("%w: the listing of %s has %d bytes, more than %d", errInvalid, tool, len(value), MaxListingBytes)
	}
	return nil
}

func checkListingNames(upstream, tool string) error {
	if upstream == "" || tool == "" || len(upstream) > MaxListingNameBytes || len(tool) > MaxListingNameBytes {
		return fmt.Errorf("%w: a listing needs an upstream and a tool of 1 to %d bytes", errInvalid, MaxListingNameBytes)
	}
	return nil
}

// listingMiss is ErrNotFound for a tool no listing told of; its message
// is made only when read, as a miss may be frequent.
type listingMiss struct{ upstream, tool string }

func (e listingMiss) Error() string {
	return "pending: no listing of tool " + quoteName(e.tool) + " of upstream " + quoteName(e.upstream)
}

func (e listingMiss) Is(t error) bool { return t == ErrNotFound }

func quoteName(s string) string { return fmt.Sprintf("%q", s) }

// keptListings filters entries to those CheckListing accepts.
func keptListings(upstream string, entries map[string][]byte) map[string][]byte {
	ok := true
	for tool, v := range entries {
		if CheckListing(upstream, tool, v) != nil {
			ok = false
			break
		}
	}
	if ok {
		return entries
	}
	out := make(map[string][]byte, len(entries))
	for tool, v := range entries {
		if CheckListing(upstream, tool, v) == nil {
			out[tool] = v
		}
	}
	return out
}
