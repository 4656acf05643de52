package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sync"

	"github.com/toolgate/toolgate/internal/keys"
	"github.com/toolgate/toolgate/pending"
)

// A parked call is sealed: its RequestDigest is a MAC, keyed by a key only
// toolgate holds (SealKey of the approvals secret), over what decides what
// runs, for whom and on whose approval: the call's ID, subject, principal,
// upstream and tool, its quorum, its stored request, and its info (the
// policy input the re-check decides on, the arguments and approvers that
// approvers are shown). The store keeps the call between the decision and
// the execution, and whoever can write to it (a Redis others can reach)
// could otherwise change the request after the policy evaluated it, or
// what approvers see, or how many must approve. Execute checks the seal
// before anything else: a call whose record was changed outside toolgate
// is refused, and nothing is sent. Approval tokens bind the same digest.

// SealKey derives the key that seals parked calls from an approvals
// secret (HKDF, with a label of its own): every replica derives the same
// one, and no MAC the secret keys elsewhere (links, grants) can stand for a
// seal.
func SealKey(secret []byte) []byte { return keys.Derive(secret, "toolgate parked call seal v1") }

// sealer seals parked calls with its first key and accepts a seal made
// with any of them, so that calls parked before the approvals secret
// changed still run. A sealer of no keys has a key of its own: it then
// runs only the calls it parked itself, which is all a single instance
// needs. Its HMACs are pooled, keyed once: a call is sealed at every park
// and checked at every execution.
type sealer struct {
	pools []sync.Pool
}

func newSealer(ks [][]byte) *sealer {
	ks = keys.OrOwn(ks)
	s := &sealer{pools: make([]sync.Pool, len(ks))}
	for i, k := range ks {
		s.pools[i].New = func() any { return hmac.New(sha256.New, k) }
	}
	return s
}

// seal is pc's seal under the first key, as RequestDigest holds it.
func (s *sealer) seal(pc *pending.Call) string {
	sum := s.mac(0, pc)
	return hex.EncodeToString(sum[:])
}

// sealed reports whether pc's RequestDigest is its seal under one of the
// keys.
func (s *sealer) sealed(pc *pending.Call) bool {
	var got [sha256.Size]byte
	if len(pc.RequestDigest) != hex.EncodedLen(len(got)) {
		return false
	}
	if _, err := hex.Decode(got[:], []byte(pc.RequestDigest)); err != nil {
		return false
	}
	for i := range s.pools {
		if want := s.mac(i, pc); hmac.Equal(want[:], got[:]) {
			return true
		}
	}
	return false
}

// mac is the HMAC of what pc's seal covers under key i: each field
// length-prefixed, as the stored request, so that no field, whatever its
// bytes, reads as another.
func (s *sealer) mac(i int, pc *pending.Call) [sha256.Size]byte {
	var b []byte
	for _, f := range []string{pc.ID, pc.Subject, pc.Principal, pc.Upstream, pc.Tool} {
		b = appendField(b, f)
	}
	b = binary.AppendUvarint(b, uint64(len(pc.Quorum)))
	for _, n := range pc.Quorum {
		b = binary.AppendVarint(b, int64(n))
	}
	m := s.pools[i].Get().(hash.Hash)
	defer s.pools[i].Put(m)
	m.Reset()
	m.Write(b)
	m.Write(binary.AppendUvarint(b[:0], uint64(len(pc.Request))))
	m.Write(pc.Request)
	m.Write(binary.AppendUvarint(b[:0], uint64(len(pc.Info))))
	m.Write(pc.Info)
	var sum [sha256.Size]byte
	m.Sum(sum[:0])
	return sum
}
