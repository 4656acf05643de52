package pending

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Remembered grants. An approver who approves a parked call may ask for it
// to be remembered: for a scope (the caller's subject and the tool, with or
// without the call's target) and a lifetime, later calls inside the scope
// that a policy answers "ask" are allowed without asking again. This file
// holds what both stores share; the store only keeps and finds grants, it
// does not decide anything with them.

// Grant is a remembered approval. Fields marked "set by the store" are
// ignored by Grants.Grant and filled in by the store.
type Grant struct {
	// ID is unguessable: the caller's when it gives one (NewGrantID), so
	// that what it seals can name the grant, else made by the store.
	ID string

	// Subject is whose calls the grant covers: the caller's principal,
	// such as "key:agent-42". The store keeps it as an opaque string.
	Subject  string
	Upstream string
	Tool     string
	// Target is the one target the grant covers, unless AnyTarget is set:
	// then Target is empty and the grant covers every target of the tool.
	Target    string
	AnyTarget bool

	// Extras binds the grant to what its call sent beyond the scope
	// (the proxy's digest of its headers and other params, opaque to
	// the store): not part of the scope, the store only keeps it, and
	// the proxy lets the grant cover only calls that send the same. ""
	// for a call that sent none, and for a grant made before grants were
	// bound to them.
	Extras string

	Approver string // who granted it
	CallID   string // the call whose approval made it
	Comment  string

	// Seal is what makes the grant toolgate's (internal/grantseal): a
	// MAC over the fields above that whoever can write to the store
	// cannot make. Opaque to the store, kept as given.
	Seal string

	CreatedAt time.Time // set by the store, by its clock
	ExpiresAt time.Time // set by the store: CreatedAt + the lifetime
}

// Grants keeps remembered grants. Both stores implement it, safe for
// concurrent use, every method one atomic step. A grant applies until its
// ExpiresAt by the store's clock, swept or not, or until it is revoked.
//
// A scope holds at most one grant: a new grant for the scope of a live one
// replaces it (the older one is deleted, so Grants lists only what
// applies), and a replacement is allowed even when the store is at
// MaxGrants.
type Grants interface {
	// Grant stores g for lifetime (more than zero, at most
	// MaxGrantLifetime) and returns it with its ID and times set. Invalid
	// input (see CheckGrant) is refused; a new grant beyond MaxGrants live
	// ones gives ErrTooManyGrants. Nothing is stored on error.
	Grant(ctx context.Context, g Grant, lifetime time.Duration) (Grant, error)

	// FindGrant returns the live grant covering the call q: when
	// q.SoleTarget is set, the grant for exactly q.Target if there is
	// one, else the grant for any target of the tool; when it is not (the
	// call acts on more than q.Target), the grant for any target alone,
	// since no grant for one target covers such a call. ErrNotFound if
	// none. It only reads, in one round trip.
	FindGrant(ctx context.Context, q GrantQuery) (Grant, error)

	// Grants returns up to limit live grants, newest first (grants made
	// within the same millisecond may come in any order in Redis).
	Grants(ctx context.Context, limit int) ([]Grant, error)

	// Revoke deletes the grant and returns it; ErrNotFound if there is no
	// live grant with that ID. Once Revoke has returned, FindGrant on
	// every replica no longer finds the grant.
	Revoke(ctx context.Context, id string) (Grant, error)
}

// GrantQuery is a call that FindGrant looks up a grant for.
type GrantQuery struct {
	Subject  string // the caller's principal, as Grant.Subject
	Upstream string
	Tool     string
	Target   string // the call's target, "" when it has none

	// SoleTarget reports that the call acts on Target and nothing else:
	// only then may a grant for exactly Target cover it. Unset (a call
	// with another target argument, an array of targets, an opaque
	// value), only a grant for any target of the tool covers the call.
	SoleTarget bool
}

// Bounds of grants, the same for every store.
const (
	// MaxGrants caps the live grants a store holds.
	MaxGrants = 10000
	// MaxGrantLifetime caps the lifetime of one grant.
	MaxGrantLifetime = 30 * 24 * time.Hour
	// MaxGrantFieldBytes caps each string field of a grant.
	MaxGrantFieldBytes = 1024
)

// ErrTooManyGrants: Grant refused a new grant because the store holds
// MaxGrants live ones; nothing was stored.
var ErrTooManyGrants = errors.New("pending: too many grants")

// CheckGrant reports whether Grants.Grant accepts g and lifetime, so that
// a caller can tell bad input from a store failure before calling it:
// Subject and Tool are required; a grant with AnyTarget has no Target;
// every string field has at most MaxGrantFieldBytes bytes, and those of
// the scope (Subject, Upstream, Tool, Target) no NUL byte; lifetime is more
// than zero and at most MaxGrantLifetime. The fields set by the store are
// not checked.
func CheckGrant(g Grant, lifetime time.Duration) error {
	if g.Subject == "" || g.Tool == "" {
		return fmt.Errorf("%w: a grant needs a subject and a tool", errInvalid)
	}
	if g.AnyTarget && g.Target != "" {
		return fmt.Errorf("%w: a grant for any target has no target (got %q)", errInvalid, g.Target)
	}
	for _, f := range [...]struct{ name, v string }{
		{"subject", g.Subject},
		{"upstream", g.Upstream},
		{"tool", g.Tool},
		{"target", g.Target},
		{"extras", g.Extras},
		{"approver", g.Approver},
		{"call ID", g.CallID},
		{"comment", g.Comment},
		{"seal", g.Seal},
	} {
		if len(f.v) > MaxGrantFieldBytes {
			return fmt.Errorf("%w: a grant's %s has %d bytes, more than %d", errInvalid, f.name, len(f.v), MaxGrantFieldBytes)
		}
	}
	// NUL separates the parts of a scope (grantScope): a part containing
	// one could make two scopes look alike.
	for _, v := range []string{g.Subject, g.Upstream, g.Tool, g.Target} {
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: a grant's scope contains a NUL byte", errInvalid)
		}
	}
	if g.ID != "" && !validGrantID(g.ID) {
		return fmt.Errorf("%w: a grant's ID is 26 base32 characters (NewGrantID), not %q", errInvalid, g.ID)
	}
	if lifetime <= 0 || lifetime > MaxGrantLifetime {
		return fmt.Errorf("%w: a grant's lifetime is more than 0 and at most %v, not %v", errInvalid, MaxGrantLifetime, lifetime)
	}
	return nil
}

// NewGrantID is a new grant ID: 128 random bits, as the stores make them.
func NewGrantID() string { return rand.Text() }

// validGrantID reports whether id has NewGrantID's form: 26 characters of
// base32 (A-Z, 2-7), nothing a key or a log line could read otherwise.
func validGrantID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// grantScope is the scope a grant covers, as one string: the key of the
// scope lookup in both stores. An exact target is written "=target" and
// any target "*", so that no target, not even "*", reads as any target.
// The parts contain no NUL (CheckGrant), so the encoding is unambiguous.
func grantScope(subject, upstream, tool, target string, anyTarget bool) string {
	t := "=" + target
	if anyTarget {
		t = "*"
	}
	return subject + "\x00" + upstream + "\x00" + tool + "\x00" + t
}

// findable reports whether a grant could cover the call q: FindGrant
// answers ErrNotFound at once for one no grant could cover (it never
// reports bad input: a call's attributes come from a request, and there is
// simply no grant for them).
func findable(q GrantQuery) bool {
	return CheckGrant(Grant{Subject: q.Subject, Upstream: q.Upstream, Tool: q.Tool, Target: q.Target}, time.Second) == nil
}

// grantNotFound is ErrNotFound for a grant ID, with a message about
// grants.
type grantNotFound struct{ id string }

func (e grantNotFound) Error() string   { return "pending: no such grant: " + e.id }
func (e grantNotFound) Is(t error) bool { return t == ErrNotFound }

func noGrant(id string) error { return grantNotFound{id: id} }

// grantMiss is ErrNotFound for a call no grant covers. It keeps the call
// and formats its message only in Error: a lookup that finds nothing, on
// the path of every ask, costs one small allocation.
type grantMiss GrantQuery

func (e grantMiss) Error() string {
	return fmt.Sprintf("pending: no such grant: none covers %q calling %s on %q with target %q", e.Subject, e.Tool, e.Upstream, e.Target)
}

func (e grantMiss) Is(t error) bool { return t == ErrNotFound }

func noGrantFor(q GrantQuery) error { return grantMiss(q) }

func tooManyGrants() error {
	return fmt.Errorf("%w: the store holds %d live grants", ErrTooManyGrants, MaxGrants)
}
