// Package grantseal seals remembered grants, so that the store alone
// cannot make one.
//
// A grant lets later calls in its scope run without asking anyone
// (pending.Grants). The store that keeps grants is shared by the replicas
// (Redis), and whoever can write to it could otherwise write a grant of
// their own: any subject, tool and target, as any approver, for as long as
// they like. So every grant carries a seal, a MAC keyed by a key derived
// from the approvals secret, which only toolgate holds, over what it
// covers and who made it, and until when. Store wraps the store: it names
// and seals each grant it keeps and, where a grant is looked up to cover a
// call, believes only a grant whose seal is right, not past its end, and
// whose sealed scope covers the call. A grant that fails is as if it were
// not there: the call asks, as it would without it, and the Store's broken
// callback is told.
//
// The seal binds what a grant covers, not whether it still exists: a
// writer who saved a grant before it was revoked or replaced can put it
// back, and it covers calls again until its sealed end.
package grantseal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/keys"
	"github.com/toolgate/toolgate/pending"
)

// Key derives the key that seals grants from an approvals secret (HKDF,
// with a label of its own): every replica derives the same one, and no
// MAC the secret keys elsewhere (links, parked calls) can stand for a
// grant's seal.
func Key(secret []byte) []byte { return keys.Derive(secret, "toolgate remembered grant seal v1") }

// version starts every seal: "g1.<end, Unix ms>.<MAC, hex>".
const version = "g1"

// Store is a pending.Grants whose grants are sealed. Grant seals with the
// first key; FindGrant believes a seal made with any of them (the secret
// and the ones before it, so that a rotation keeps the grants made
// before it). Grants and Revoke are the store's: the list shows grants as
// stored, sealed or not, and Sealed tells them apart.
type Store struct {
	inner  pending.Grants
	keys   [][]byte
	broken func(g pending.Grant, reason string)
	now    func() time.Time
}

// New wraps grants; nil stays nil (a toolgate without grants). broken, if
// set, is told of each grant FindGrant found in the store but did not
// believe, and why. Without keys the Store has a key of its own: it then
// believes only the grants it made, which is all a single instance needs.
func New(grants pending.Grants, ks [][]byte, broken func(g pending.Grant, reason string)) pending.Grants {
	if grants == nil {
		return nil
	}
	return &Store{inner: grants, keys: keys.OrOwn(ks), broken: broken, now: time.Now}
}

// Grant seals g, valid for lifetime from now by this replica's clock, and
// stores it. The store's own expiry, by its clock, still applies: a grant
// covers calls until the earlier of the two.
func (s *Store) Grant(ctx context.Context, g pending.Grant, lifetime time.Duration) (pending.Grant, error) {
	g.ID = pending.NewGrantID() // named here, so that the seal binds it
	g.Seal = seal(s.keys[0], &g, s.now().Add(lifetime))
	return s.inner.Grant(ctx, g, lifetime)
}

// FindGrant finds the grant covering q as the store does, and returns it
// only if its seal is right, its sealed end is still ahead and what it
// covers, as sealed, covers q; otherwise pending.ErrNotFound, as if there
// were none. The last check matters as much as the seal: the store finds a
// grant through its scope, and a key pointing another scope at a real
// grant (in Redis, grantscope:<scope> holds a grant's ID) would otherwise
// lend that grant to another caller or tool.
func (s *Store) FindGrant(ctx context.Context, q pending.GrantQuery) (pending.Grant, error) {
	g, err := s.inner.FindGrant(ctx, q)
	if err != nil {
		return g, err
	}
	why := s.check(&g)
	if why == "" && !covers(&g, q) {
		why = "it was found under a scope it does not cover (the store points another scope at it)"
	}
	if why != "" {
		if s.broken != nil {
			s.broken(g, why)
		}
		return pending.Grant{}, pending.ErrNotFound
	}
	return g, nil
}

// covers reports whether g's scope covers the call q: its caller, upstream
// and tool, and its target, which only a call that acts on nothing else
// (q.SoleTarget) can be covered by, or any target.
func covers(g *pending.Grant, q pending.GrantQuery) bool {
	return g.Subject == q.Subject && g.Upstream == q.Upstream && g.Tool == q.Tool &&
		(g.AnyTarget || (q.SoleTarget && g.Target == q.Target))
}

// Sealed reports whether g's seal is right and its sealed end ahead: a
// grant toolgate made and that is still whole. One that is not covers no
// call, whatever the store says of it.
func (s *Store) Sealed(g pending.Grant) bool { return s.check(&g) == "" }

// Grants lists the store's grants as stored.
func (s *Store) Grants(ctx context.Context, limit int) ([]pending.Grant, error) {
	return s.inner.Grants(ctx, limit)
}

// Revoke revokes a grant in the store.
func (s *Store) Revoke(ctx context.Context, id string) (pending.Grant, error) {
	return s.inner.Revoke(ctx, id)
}

// check says why g is not believed, or "" if it is.
func (s *Store) check(g *pending.Grant) string {
	end, mac, ok := parse(g.Seal)
	switch {
	case g.Seal == "":
		return "it has no seal (made outside toolgate, or by a release before grants were sealed)"
	case !ok:
		return "its seal is malformed"
	}
	for _, k := range s.keys {
		if hmac.Equal(sum(k, g, end), mac) {
			if !s.now().Before(time.UnixMilli(end)) {
				return "its sealed end has passed"
			}
			return ""
		}
	}
	return "its seal does not match what it covers (changed in the store, or sealed with a key this toolgate does not hold)"
}

// seal is g's seal under key, ending at end.
func seal(key []byte, g *pending.Grant, end time.Time) string {
	ms := end.UnixMilli()
	return version + "." + strconv.FormatInt(ms, 10) + "." + hex.EncodeToString(sum(key, g, ms))
}

// parse splits a seal into its end (Unix ms) and MAC.
func parse(s string) (end int64, mac []byte, ok bool) {
	v, rest, ok1 := strings.Cut(s, ".")
	e, m, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || v != version {
		return 0, nil, false
	}
	end, err := strconv.ParseInt(e, 10, 64)
	if err != nil {
		return 0, nil, false
	}
	mac, err = hex.DecodeString(m)
	if err != nil || len(mac) != sha256.Size {
		return 0, nil, false
	}
	return end, mac, true
}

// sum is the MAC of g's ID, what it covers (scope, the call's headers and
// params as Extras binds them), who made it and from which call, and its
// end. The ID is bound so that a copy under another ID, which Revoke of
// the grant would not delete, is no grant. Each string is length-prefixed,
// so no two grants share an input. The comment is not sealed: it changes
// nothing a grant lets through.
func sum(key []byte, g *pending.Grant, end int64) []byte {
	m := hmac.New(sha256.New, key)
	var buf [binary.MaxVarintLen64]byte
	for _, f := range [...]string{g.ID, g.Subject, g.Upstream, g.Tool, g.Target, g.Extras, g.Approver, g.CallID} {
		m.Write(buf[:binary.PutUvarint(buf[:], uint64(len(f)))])
		m.Write([]byte(f))
	}
	anyTarget := byte(0)
	if g.AnyTarget {
		anyTarget = 1
	}
	m.Write([]byte{anyTarget})
	m.Write(buf[:binary.PutVarint(buf[:], end)])
	return m.Sum(nil)
}
