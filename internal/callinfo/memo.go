package callinfo

import (
	"bytes"
	"hash/maphash"
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
// bytes ever gives the same Info; every caller gets its own copy.
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

// get returns a copy of the Info decoded from enc, if it is kept.
func (m *memo) get(h uint64, enc []byte) (Info, bool) {
	m.mu.Lock()
	e, ok := m.entries[h]
	m.mu.Unlock()
	if !ok || !bytes.Equal(e.enc, enc) {
		return Info{}, false
	}
	return e.info.clone(), true
}

// put keeps info, decoded from enc. A full memo is emptied: the calls in
// flight fill it again at the cost of one decoding each.
func (m *memo) put(h uint64, enc []byte, info Info) {
	if len(enc) > memoMaxInfo {
		return
	}
	e := memoEntry{enc: bytes.Clone(enc), info: info.clone()}
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

// clone returns a deep copy of info: callers may change what they get
// without touching what the memo keeps.
func (info Info) clone() Info {
	c := info
	c.Arguments = bytes.Clone(info.Arguments)
	c.PolicyInput = bytes.Clone(info.PolicyInput)
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
