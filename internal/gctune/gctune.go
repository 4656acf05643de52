// Package gctune keeps Go's garbage collector from running every few
// megabytes while the live heap is small.
//
// With the default GOGC=100 the collector runs whenever the heap doubles.
// toolgate's live heap is a few megabytes (the compiled policy, the rules
// table, the connection pools) and every call allocates some 20 KiB, so
// under load it collected 25 times a second, and marking and assisting
// cost more CPU than deciding the calls. The tuner raises GOGC while the live
// heap is below half of a floor, so that the next collection comes at
// about the floor instead of at twice a small heap, and gives back the
// default as soon as the live heap is larger: the heap then grows as it
// would have, twice the live heap, never more.
//
// Setting GOGC in the environment turns the tuning off (the operator's
// setting wins); GOMEMLIMIT, when set, still bounds the heap as Go
// documents, tuned or not.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultFloor is the heap size the collector may wait for while the live
// heap is small: 16 MiB, about three times what toolgate keeps live. With
// it, toolgate-bench -rss read 59.6 MiB RSS at 1,000 calls/s (47.8 MiB
// untuned; 79 MiB with a 32 MiB floor, which saved no further CPU).
const DefaultFloor = 16 << 20

// maxPercent bounds GOGC: a live heap that grows fast between two
// collections can overshoot the floor by at most this factor.
const maxPercent = 1000

// Percent is the GOGC that puts the next collection at the larger of
// floor and twice live.
func Percent(live, floor uint64) int {
	if live*2 >= floor {
		return 100
	}
	live = max(live, 1)
	return int(min(floor*100/live-100, maxPercent))
}

// Tuner adjusts GOGC after every collection until Stop.
type Tuner struct {
	floor   uint64
	mu      sync.Mutex // serialises tune and Stop
	stopped bool
	sample  []metrics.Sample
	percent atomic.Int64
	// before is the GOGC in force when the tuner started, given back by
	// Stop.
	before int
}

// Start tunes GOGC after every collection, with the given floor. It does
// nothing, and returns nil, when GOGC is set in the environment.
func Start(floor uint64) *Tuner {
	if _, set := os.LookupEnv("GOGC"); set {
		return nil
	}
	t := &Tuner{floor: floor, before: 100, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}}
	t.tune()
	t.arm()
	return t
}

// arm registers a cleanup on an object nothing references: it runs after
// the next collection, tunes, and arms again. This follows the collector
// cycle by cycle at no cost between cycles.
func (t *Tuner) arm() {
	// An object with a pointer field: the tiny allocator, which packs
	// small pointer-free objects together, would keep it alive with its
	// neighbours, and its cleanup might then never run.
	sentinel := &struct{ _ *byte }{}
	runtime.AddCleanup(sentinel, func(t *Tuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

// tune sets GOGC for the live heap the last collection found; false once
// stopped. GOGC moves in steps of 50, as each change stops the world for
// a moment.
func (t *Tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	live := uint64(0)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	if t.percent.Load() == 0 && t.sample[1].Value.Kind() == metrics.KindUint64 {
		t.before = int(t.sample[1].Value.Uint64()) // the first round: what to give back
	}
	p := Percent(live, t.floor)
	if p > 100 {
		p -= p % 50
	}
	if int64(p) != t.percent.Load() {
		t.percent.Store(int64(p))
		debug.SetGCPercent(p)
	}
	return true
}

// Percent is the GOGC the tuner last set.
func (t *Tuner) Percent() int { return int(t.percent.Load()) }

// Stop ends the tuning and restores the GOGC in force before Start. A nil
// Tuner (tuning off) stops as a no-op.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.before)
	}
}
