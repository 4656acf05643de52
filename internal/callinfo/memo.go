package callinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"sync"
)

// Bounds of the decoded Infos a process keeps: a few thousand calls in
// flight at once, each a few KiB, and never one Info larger than
// memoMaxInfo (an Info carries the call's arguments and policy input).
const (
	memoMaxEntries = 2048
	memoMaxBytes   = 16 << 20
	memoMaxInfo    = 64 << 10
)

// memo keeps decoded Infos by their encoding. A call's Info never changes
// once parked, and one asked call is decoded several times on the replica
// that parked it: its announcement, the approver's decision, the re-check
// before it runs and its resolved announcement each read the stored call,
// and encoding/json spends ~7 µs on a small Info. An entry is found by
// the whole encoding, compared byte for byte, so nothing but the same
// bytes ever gives the same Info. Every caller gets the same Info, its
// slices and pointers shared: a decoded Info is read, never written
// (Decode).
type memo struct {
	seed    maphash.Seed
	mu      sync.Mutex
	entries map[uint64]memoEntry
	bytes   int
}

type memoEntry struct {
	enc  []byte
	info Info
}

var decoded = memo{seed: maphash.MakeSeed()}

func (m *memo) hash(enc []byte) uint64 { return maphash.Bytes(m.seed, enc) }

// get returns the Info decoded from enc, if it is kept; it is shared with
// every other caller, and read only.
func (m *memo) get(h uint64, enc []byte) (Info, bool) {
	m.mu.Lock()
	e, ok := m.entries[h]
	m.mu.Unlock()
	if !ok || !bytes.Equal(e.enc, enc) {
		return Info{}, false
	}
	return e.info, true
}

// put keeps info, decoded from enc. Both are the memo's from then on:
// nobody writes to them again (the caller has them cloned, or decoded them
// itself). A full memo is emptied: the calls in flight fill it again at
// the cost of one decoding each.
func (m *memo) put(h uint64, enc []byte, info Info) {
	if len(enc) > memoMaxInfo {
		return
	}
	e := memoEntry{enc: enc, info: info}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.entries[h]; ok {
		m.bytes -= old.size()
		delete(m.entries, h)
	}
	if m.entries == nil || len(m.entries) >= memoMaxEntries || m.bytes+e.size() > memoMaxBytes {
		m.entries, m.bytes = make(map[uint64]memoEntry, 64), 0
	}
	m.entries[h] = e
	m.bytes += e.size()
}

// size is about what e holds: its encoding, the decoded copy's bytes, and
// a slice entry or more for every string of its lists, every header, every
// other parameter and every approver (which a few bytes of JSON can name by the thousand).
func (e memoEntry) size() int {
	n := 2*len(e.enc) + 16*(len(e.info.Reasons)+len(e.info.RuleIDs))
	if h := e.info.Headers; h != nil {
		n += 48 * len(h.List)
	}
	if p := e.info.OtherParams; p != nil {
		n += 64 * len(p.List) // the values are in the encoding, counted twice above
	}
	for _, a := range e.info.Approvers {
		n += 96 + 16*(len(a.Groups)+len(a.Subjects))
	}
	return n
}

// withOwnLists returns info with every list, header and parameter copied
// (its arguments and policy input are left as they are): what Encode
// keeps must not share what its caller may still change.
func (info Info) withOwnLists() Info {
	c := info
	c.Reasons = slices.Clone(info.Reasons)
	c.RuleIDs = slices.Clone(info.RuleIDs)
	c.Headers = info.Headers.clone()
	c.OtherParams = info.OtherParams.clone()
	if info.Approvers != nil {
		c.Approvers = make([]Approvers, len(info.Approvers))
		for i, a := range info.Approvers {
			a.Groups, a.Subjects = slices.Clone(a.Groups), slices.Clone(a.Subjects)
			c.Approvers[i] = a
		}
	}
	return c
}

// CheckKept decodes every kept encoding again and returns an error naming
// the first whose kept Info differs from its decoding: some reader wrote
// to an Info that Decode shares. Tests call it after running the code
// that reads Infos (a package's TestMain); it takes a decoding per entry.
func CheckKept() error {
	decoded.mu.Lock()
	entries := slices.Collect(maps.Values(decoded.entries))
	decoded.mu.Unlock()
	for _, e := range entries {
		var want Info
		if err := json.Unmarshal(e.enc, &want); err != nil {
			return fmt.Errorf("callinfo: a kept Info's encoding no longer reads: %w: %.80q", err, e.enc)
		}
		kept, fresh := reflect.ValueOf(e.info), reflect.ValueOf(want)
		for i := range kept.NumField() {
			if !reflect.DeepEqual(kept.Field(i).Interface(), fresh.Field(i).Interface()) {
				return fmt.Errorf("callinfo: a reader changed the %s of a kept Info (call %s of %s, tool %q)",
					kept.Type().Field(i).Name, want.Kind, want.Upstream, want.Tool)
			}
		}
	}
	return nil
}
