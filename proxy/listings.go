package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/pending"
)

// Listings shared by the replicas. What a tools/list answer tells of each
// tool (listedTool) decides how later calls of the tool are checked and
// what the policy sees of it. Each replica keeps it in memory
// (upstream.listed) and, when Config.Listings is set, in the shared store
// too: a client may list the tools through one replica and call them
// through another, or through one restarted since, and every replica must
// check and decide the call the same way.
//
// A listing (one page of one) writes the tools whose entry changed from
// what the replica kept, or that it last wrote pending.ListingRefresh ago
// (each tool's entry lapses on its own), in one round trip, before the
// answer goes on (so that a client that lists then calls through another
// replica finds it there). A call of a tool the replica knows nothing of
// reads the shared entry once, then keeps it, and reads it again once
// what it keeps is freshFor old; a call whose Mcp-Param headers disagree
// with the kept entry reads it again, once, since another replica may
// have relayed a newer listing. "Nothing shared" is kept briefly
// (missTTL).
//
// Failures: a listing whose write fails is relayed all the same (logged,
// counted in toolgate_listings_not_shared_total), and its tools stay due
// for the next listing. A call whose Mcp-Param headers need the shared
// entry when the store fails is refused, 503 (JSON-RPC -31003), and never
// forwarded; one without them is decided without annotations (mcp.go).

// missTTL is how long a replica believes that no listing told of a tool,
// after the store said so: a flood of calls of unknown tools reads the
// store once per tool and missTTL, and a tool a listing through another
// replica just told of is known here after missTTL at most.
const missTTL = 3 * time.Second

// freshFor is how long a replica uses what it learned of a tool without
// reading the shared entry again: a listing relayed by another replica
// (a tool's new annotations, or headers that now mirror another argument)
// reaches every replica's decisions within freshFor, at the cost of one
// store read per tool and freshFor on each replica.
const freshFor = 3 * time.Second

// maxMisses bounds the tools a replica keeps misses for, per upstream.
const maxMisses = 1024

// listingWriteTimeout bounds a listing's write to the store: a slow store
// delays the listing no longer than this.
const listingWriteTimeout = 2 * time.Second

// sharedListings is an upstream's side of the shared listings.
type sharedListings struct {
	store    pending.Listings
	upstream string
	now      func() time.Time
	log      *slog.Logger
	failed   prometheus.Counter
	mu       sync.Mutex
	misses   map[string]time.Time // tool -> until when nothing is shared
}

// wireTool is a listedTool as the store keeps it. Neither member is
// omitted when empty: nil and empty differ (no annotations, and an empty
// object; no headers, and headers none of which is honoured).
type wireTool struct {
	Annotations map[string]any      `json:"a"`
	Params      map[string][]string `json:"p"`
}

// newListedTool is a listedTool with its encoding.
func newListedTool(ann map[string]any, params map[string][]string) listedTool {
	enc, err := json.Marshal(wireTool{Annotations: ann, Params: params})
	if err != nil {
		enc = nil // annotations read from JSON encode again; never reached
	}
	return listedTool{annotations: ann, params: params, enc: enc}
}

// decodeListedTool reads a listedTool the store kept.
func decodeListedTool(b []byte) (listedTool, bool) {
	var w wireTool
	if err := json.Unmarshal(b, &w); err != nil {
		return listedTool{}, false
	}
	return listedTool{annotations: w.Annotations, params: w.Params, enc: bytes.Clone(b)}, true
}

// Where a listing came from (listing).
type listingSource uint8

const (
	fromNowhere listingSource = iota // no listing told of the tool
	fromMemory                       // kept by this replica
	fromStore                        // read from the shared store just now
)

// listing is what toolgate knows of the tool name of up: what this replica
// keeps, else what the shared listings hold (then kept here). An error is
// the store's: nothing is known, and the call must not go on.
func (up *upstream) listing(ctx context.Context, name string) (listedTool, listingSource, error) {
	sh := up.shared
	if v, ok := up.listed.Load(name); ok {
		lt := v.(listedTool)
		if sh == nil || sh.now().UnixNano()-lt.at < int64(freshFor) {
			return lt, fromMemory, nil
		}
		return up.refreshed(ctx, name, lt), fromMemory, nil
	}
	if sh == nil || !toolName.MatchString(name) || sh.missed(name) {
		return listedTool{}, fromNowhere, nil
	}
	lt, ok, err := sh.recall(ctx, name)
	if err != nil || !ok {
		return listedTool{}, fromNowhere, err
	}
	return up.keepRecalled(name, lt), fromStore, nil
}

// refreshed is kept, the entry of name this replica learned more than
// freshFor ago, checked against the shared listings: the shared entry when
// it differs (another replica relayed a newer listing), kept otherwise,
// and kept again for freshFor. When the store cannot be read, kept is
// used all the same, as it would be within freshFor, and read again
// after freshFor: the call is checked against what a listing told, and a
// store outage does not stop the tools this replica knows.
func (up *upstream) refreshed(ctx context.Context, name string, kept listedTool) listedTool {
	sh := up.shared
	lt, ok, err := sh.recall(ctx, name)
	if err != nil {
		sh.log.Warn("shared listing not read; the tool's entry this replica keeps is used", "upstream", sh.upstream, "tool", name, "error", err)
	}
	if err != nil || !ok || bytes.Equal(lt.enc, kept.enc) {
		lt = kept
	}
	lt.at = sh.now().UnixNano()
	up.listed.Store(name, lt)
	return lt
}

// relisting reads the shared entry of name again, for a call whose
// headers disagree with kept, the entry this replica keeps: the entry, if
// the store holds another, which is kept here from now on.
func (up *upstream) relisting(ctx context.Context, name string, kept listedTool) (listedTool, bool, error) {
	sh := up.shared
	if sh == nil {
		return listedTool{}, false, nil
	}
	lt, ok, err := sh.recall(ctx, name)
	if err != nil || !ok || bytes.Equal(lt.enc, kept.enc) {
		return listedTool{}, false, err
	}
	up.rememberTool(name, lt)
	return lt, true, nil
}

// keepRecalled keeps lt, read from the store, unless a listing through
// this replica got there first; it returns what is kept.
func (up *upstream) keepRecalled(name string, lt listedTool) listedTool {
	lt.at = up.shared.now().UnixNano()
	if up.listedNames.Add(1) > maxListed {
		up.listedNames.Add(-1)
		return lt // used for this call, not kept
	}
	if v, loaded := up.listed.LoadOrStore(name, lt); loaded {
		up.listedNames.Add(-1)
		return v.(listedTool)
	}
	return lt
}

// recall reads the shared entry of name. ok is false when there is none
// (remembered as a miss for missTTL) or it cannot be read.
func (sh *sharedListings) recall(ctx context.Context, name string) (listedTool, bool, error) {
	b, err := sh.store.Recall(ctx, sh.upstream, name)
	if errors.Is(err, pending.ErrNotFound) {
		sh.miss(name)
		return listedTool{}, false, nil
	}
	if err != nil {
		return listedTool{}, false, err
	}
	lt, ok := decodeListedTool(b)
	if !ok {
		sh.log.Warn("shared listing unreadable; the tool is taken as never listed", "upstream", sh.upstream, "tool", name)
		sh.miss(name)
	}
	return lt, ok, nil
}

// missed reports whether the store said lately that no listing told of
// name.
func (sh *sharedListings) missed(name string) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	until, ok := sh.misses[name]
	if ok && sh.now().After(until) {
		delete(sh.misses, name)
		return false
	}
	return ok
}

// miss remembers, for missTTL, that no listing told of name. At most
// maxMisses names: the lapsed ones go first, then all of them.
func (sh *sharedListings) miss(name string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := sh.now()
	if sh.misses == nil {
		sh.misses = make(map[string]time.Time)
	}
	if len(sh.misses) >= maxMisses {
		for n, until := range sh.misses {
			if now.After(until) {
				delete(sh.misses, n)
			}
		}
		if len(sh.misses) >= maxMisses {
			clear(sh.misses)
		}
	}
	sh.misses[name] = now.Add(missTTL)
}

// share writes entries, what a listing told of the tools due
// (rememberTool), to the shared store in one round trip, and marks them
// written. A failure is logged and counted, never the listing's: its
// answer goes on, and the tools stay due for the next listing.
func (up *upstream) share(ctx context.Context, entries map[string][]byte) {
	if len(entries) == 0 {
		return
	}
	sh := up.shared
	now := sh.now().UnixNano()
	// The client hanging up must not cut the write short: the replica
	// keeps the listing, and would not write it again.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listingWriteTimeout)
	defer cancel()
	kept, err := sh.store.Remember(wctx, sh.upstream, entries)
	if err != nil {
		sh.failed.Inc()
		sh.log.Error("listing not shared: other replicas may refuse or decide its tools' calls differently until it is", "upstream", sh.upstream, "tools", len(entries), "error", err)
		return
	}
	if kept < len(entries) {
		// The store keeps at most pending.MaxListedTools tools of an
		// upstream (and skips names or entries past its bounds): the
		// others' calls are checked and decided only where they were
		// listed, as before the listings were shared. They stay due.
		sh.failed.Inc()
		sh.log.Warn("listing shared in part: the store is full of this upstream's tools, or some are past its bounds", "upstream", sh.upstream, "tools", len(entries), "kept", kept)
		return
	}
	for name, enc := range entries {
		if v, ok := up.listed.Load(name); ok {
			if lt := v.(listedTool); bytes.Equal(lt.enc, enc) {
				lt.sharedAt = now
				up.listed.Store(name, lt)
			}
		}
	}
}
