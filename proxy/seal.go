package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"

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
// secret: every replica derives the same one, and it is not the secret
// that signs links.
func SealKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("toolgate parked call seal v1"))
	return m.Sum(nil)
}

// sealKeys are the keys a Server seals with (the first) and accepts (all,
// so that calls parked before the approvals secret changed still run). A
// Server given none has a key of its own: it then runs only the calls it
// parked itself, which is all a single instance needs.
func sealKeys(keys [][]byte) [][]byte {
	if len(keys) > 0 {
		return keys
	}
	k := make([]byte, sha256.Size)
	_, _ = rand.Read(k)
	return [][]byte{k}
}

// seal is pc's seal under key.
func seal(key []byte, pc *pending.Call) string {
	q := make([]string, len(pc.Quorum))
	for i, n := range pc.Quorum {
		q[i] = strconv.Itoa(n)
	}
	// Length-prefixed, as the stored request: no field, whatever its
	// bytes, reads as another.
	var b []byte
	for _, f := range []string{pc.ID, pc.Subject, pc.Principal, pc.Upstream, pc.Tool, strings.Join(q, ",")} {
		b = appendField(b, f)
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	m.Write(binary.AppendUvarint(nil, uint64(len(pc.Request))))
	m.Write(pc.Request)
	m.Write(binary.AppendUvarint(nil, uint64(len(pc.Info))))
	m.Write(pc.Info)
	return hex.EncodeToString(m.Sum(nil))
}

// sealed reports whether pc's RequestDigest is its seal under one of keys.
func sealed(keys [][]byte, pc *pending.Call) bool {
	for _, k := range keys {
		if hmac.Equal([]byte(seal(k, pc)), []byte(pc.RequestDigest)) {
			return true
		}
	}
	return false
}
