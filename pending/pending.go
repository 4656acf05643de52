// Package pending keeps parked calls: tool calls a policy answered "ask",
// waiting for a human, and what became of them (docs/parked-calls.md). It knows
// nothing of HTTP, Rego or approval links: a call's request and display
// information are opaque bytes to it.
//
//	waiting ──approve──► approved ──claim──► executing ──► executed (result stored)
//	   │                                        └──(lease runs out)──► unknown (never re-executed)
//	   ├──reject──► rejected        ├──ttl──► expired        └──cancel──► cancelled
//	                                           executing ──(nothing was sent)──► failed
//
// Every transition is atomic and the first terminal decision wins. An
// approved call is claimed by exactly one executor; a claim carries a fence
// so that a lost executor's late write cannot win. Times (expiry, leases)
// come from the store's own clock, so replicas' clock skew changes nothing.
package pending

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is where a call is in its life.
type State string

const (
	Waiting   State = "waiting"
	Approved  State = "approved"
	Executing State = "executing"
	Executed  State = "executed"
	Rejected  State = "rejected"
	Expired   State = "expired"
	Failed    State = "failed"
	Unknown   State = "unknown"
	Cancelled State = "cancelled"
)

// allStates are the states of a parked call.
var allStates = [...]State{Waiting, Approved, Executing, Executed, Rejected, Expired, Failed, Unknown, Cancelled}

// States returns the states of a parked call, in the order of its life,
// in a slice of the caller's own.
func States() []State { return slices.Clone(allStates[:]) }

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool {
	switch s {
	case Executed, Rejected, Expired, Failed, Unknown, Cancelled:
		return true
	}
	return false
}

// Errors. Store errors that are none of these (a Redis outage, a timeout)
// are returned wrapped as they come: callers treat them as "unavailable".
var (
	// ErrNotFound: no call with that ID (never parked, or gone after its
	// retention time); for the session methods, no owner recorded for
	// that session.
	ErrNotFound = errors.New("pending: no such call")
	// ErrConflict: the call is not in a state that allows the transition
	// (decided already, not approved, finished). Returned as *StateError.
	ErrConflict = errors.New("pending: the call's state does not allow this")
	// ErrDamaged: the store holds the call in a form that does not decode
	// (changed by hand, or by another program). Nothing reads it as
	// anything else: it is neither decided nor run.
	ErrDamaged = errors.New("pending: damaged call record")
	// ErrFenced: the claim is no longer the executor's (its lease ran out,
	// or another claim replaced it); the late write was refused.
	ErrFenced = errors.New("pending: the claim was lost")
	// ErrLapsed is the ErrFenced of the one Finish that found the lease
	// run out and itself made the call Unknown (no sweep did before it):
	// Finish then returns the call too, so that its end can be reported
	// once. errors.Is(ErrLapsed, ErrFenced) holds.
	ErrLapsed = fmt.Errorf("%w: the lease ran out", ErrFenced)
	// ErrTooMany: Park refused a new call because its principal already
	// has Options.MaxParkedPerPrincipal calls waiting or approved, or the
	// store holds Options.MaxParked such calls; nothing was parked.
	ErrTooMany = errors.New("pending: too many parked calls")
)

// StateError is ErrConflict with the call as it now stands.
type StateError struct {
	Call Call
	// Ended is set when this very transition ended the call, which was
	// overdue (see "Overdue calls"): its caller is the one to report the
	// end, which no Expire will return.
	Ended bool
}

func (e *StateError) Error() string {
	return fmt.Sprintf("pending: call %s is %s", e.Call.ID, e.Call.State)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *StateError) Is(target error) bool { return target == ErrConflict }

// Call is a parked call. Fields marked "set by the store" are ignored by
// Park and filled in by the store.
type Call struct {
	ID    string
	State State // set by the store

	// AttachKey and ArgsKey, when set, make retries attach to this call
	// instead of parking a new one (see Store.Park): a later Park whose
	// AttachKey equals either of them attaches. A call may be found by
	// two keys: the proxy's AttachKey is an Idempotency-Key's digest when
	// the call has one, and ArgsKey is always the digest of what makes
	// calls identical (principal, upstream, tool, canonical arguments), so
	// that a retry without the key, whose AttachKey is that digest, still
	// finds the call. The store treats both as opaque. ArgsDigest is kept
	// so the caller can tell an Idempotency-Key reused with other
	// arguments.
	AttachKey  string
	ArgsKey    string
	ArgsDigest string

	Subject  string // who made the call
	Upstream string
	Tool     string

	// Principal owns the call: the credential kind with its subject
	// ("key:alice", "jwt:https://idp.example.com#alice", "anonymous").
	// The store keeps it as an opaque string and counts the calls of each
	// principal for Options.MaxParkedPerPrincipal; a call without one is
	// counted only towards Options.MaxParked.
	Principal string

	// Request is the request to forward once approved, exactly as it was
	// evaluated; RequestDigest is its digest (approval tokens bind it).
	// A call that reaches a terminal state no longer has its Request: it
	// will never be sent, and it may carry credentials for the upstream
	// (a cookie, an API key) that should not outlive their use by
	// ResultTTL. RequestDigest stays.
	Request       []byte
	RequestDigest string
	// Info is what approvers and the status endpoint show (JSON).
	Info []byte
	// Brief is a small summary of Info for lists of calls (JSON, a few
	// KiB at most): what ListBrief returns instead of Request and Info.
	// Like Info, it is opaque to the store.
	Brief []byte

	CreatedAt time.Time // set by the store
	ExpiresAt time.Time // set by the store: CreatedAt + the ttl given to Park, later if approved near it

	// Quorum, when set, makes the call need several approvers: entry i is
	// how many distinct approvers must approve towards requirement i (an
	// ask reason that names its approvers). Empty: one approval decides.
	Quorum []int

	DecidedBy string    // set by Decide: who approved last, or who rejected
	Comment   string    // set by Decide
	DecidedAt time.Time // set by Decide or Cancel
	// Approvals are the approvals counted so far, in order (set by
	// Decide). A call with a Quorum may have some while still Waiting.
	Approvals []Approval

	Fence      int64     // set by Claim: increases at every claim
	LeaseUntil time.Time // set by Claim
	// ClaimedAt is when the process that holds the claim asked for it, by
	// its own clock (LeaseUntil is by the store's): the lease ran from no
	// earlier, so whenever the execution starts, it ends by ClaimedAt and
	// the lease. Set by the claimer, never stored.
	ClaimedAt time.Time

	Result    *Result // set by Finish
	Delivered bool    // set by Deliver
}

// Result is what the upstream answered (or what toolgate answered for it).
type Result struct {
	Status    int
	Header    map[string][]string
	Body      []byte
	Truncated bool // the body was cut at the configured size
}

// Store keeps parked calls. Implementations are safe for concurrent use and
// every method is one atomic step. A Call a method returns is the caller's,
// except its byte slices (Request, Info, Brief, Result.Body), which a store
// may share between the calls it hands out and must not be modified:
// nothing changes them once they are stored.
//
// Overdue calls. A call is overdue when it is Waiting or Approved past its
// ExpiresAt, or Executing past its LeaseUntil, by the store's clock. An
// overdue call is never claimed, decided or finished with a result, swept
// or not. It is ended (Expired, or Unknown while executing) by Expire, or
// by the one transition that would have moved it out of its state, which
// then hands it back with its error: Decide or Cancel of a Waiting call
// and Claim of an Approved call make it Expired (a *StateError with it),
// Finish of an Executing call with its fence makes it Unknown (ErrLapsed
// with it). Every other transition refuses an overdue call as it would
// refuse it in time, and leaves it as it stands: a Claim of a Waiting or
// Executing call, a Decide or Cancel of an Approved or Executing one, a
// Finish with a stale fence or of a call not executing. Such a caller is
// not the one to learn of the end (an executor still holding the fence
// is), so ending the call there would lose the report of its end: Expire
// would no longer return it, and the executor's Finish would get ErrFenced
// instead of ErrLapsed. So every end of an overdue call reaches exactly one
// caller: Expire's, or the transition's that made it. Get shows an overdue
// call as stored.
type Store interface {
	// Park stores c as Waiting until the store's now + ttl. If c.AttachKey
	// is set and names an attachable call, nothing is stored and that call
	// is returned with attached = true. A call is attachable while it is
	// waiting, approved or executing, and once it ended executed, rejected
	// or expired until its outcome is delivered (Deliver): a retry learns
	// the result, the rejection or the expiry once, and only then parks
	// anew. A cancelled, failed or unknown call is not attachable. Only
	// c.AttachKey is looked up; a new call is recorded under c.AttachKey
	// and under c.ArgsKey, except that an ArgsKey naming another
	// attachable call keeps naming it (the first identical call stays the
	// one found). A taken c.ID is an error.
	// A new call (not an attach) beyond the store's caps on waiting and
	// approved calls (Options.MaxParked, Options.MaxParkedPerPrincipal)
	// gives ErrTooMany, and nothing is stored.
	Park(ctx context.Context, c Call, ttl time.Duration) (stored Call, attached bool, err error)

	// Attaches returns the call a Park of c would attach to now (the
	// attachable call c.AttachKey names), or ErrNotFound; it changes
	// nothing. A caller that would let c run without parking it (a
	// remembered grant) asks first whether c is a retry of a parked call.
	Attaches(ctx context.Context, c Call) (Call, error)

	// Get returns the call, or ErrNotFound.
	Get(ctx context.Context, id string) (Call, error)

	// Peek is Get for a caller that decides the call next (Decide,
	// Cancel): a store may answer from what it holds itself, without
	// Request, and so miss a change it has not yet heard of, such as a
	// transition made by another replica a moment ago or an approval that
	// did not complete a quorum. The transition that follows checks the
	// call as it stands. Never for what is shown as the call's state.
	Peek(ctx context.Context, id string) (Call, error)

	// Decide records d on a Waiting call. A rejection moves it to
	// Rejected. An approval is added to the call's Approvals, once per
	// approver (an approver who approved already changes nothing and gets
	// the call as it stands); when the approvals meet the call's Quorum
	// (or the call has none) the call moves to Approved, with d.By as
	// DecidedBy. The first decision wins: a call that is no longer
	// Waiting gives a *StateError with the call as it stands, and a
	// Waiting call past its expiry becomes Expired and gives a
	// *StateError with it (see "Overdue calls"). An approval moves the call's expiry to at least now +
	// Options.ApprovedWindow, so that an approved call can still be
	// claimed. The call Decide returns has no Request: a decision's
	// callers show and report the call, and Claim returns it whole (a
	// *StateError's call is whole). With d.Claim, an approval that moves
	// the call to Approved may claim it in the same step (Decision.Claim):
	// the call then comes back Executing and whole, as from Claim.
	Decide(ctx context.Context, id string, d Decision) (Call, error)

	// Cancel moves a Waiting call to Cancelled, else *StateError; a
	// Waiting call past its expiry becomes Expired instead, as with
	// Decide. The call it returns, ended, has no Request.
	Cancel(ctx context.Context, id string) (Call, error)

	// Claim moves an Approved call to Executing for one executor: the
	// fence increases and the lease runs until now + lease. An Approved
	// call past its expiry becomes Expired instead and gives a *StateError
	// with it; a call that is not Approved gives a *StateError with the
	// call as it stands, left unchanged even when overdue (see "Overdue
	// calls"). Of concurrent claims exactly one succeeds.
	Claim(ctx context.Context, id string, lease time.Duration) (Call, error)

	// Finish moves an Executing call with this fence to Executed, Failed
	// or Unknown and stores its result. ErrFenced when the fence is stale
	// or the call is not Executing: the call is left unchanged, even when
	// overdue. When the call is Executing with this fence but its lease
	// ran out (and Expire has not ended it yet), the result is refused,
	// the call becomes Unknown without a result, and Finish returns it
	// with ErrLapsed. The call it returns has res as Get would read it
	// back, whose Body may be res.Body itself: like any byte slice a
	// store returns, neither is modified after. It has neither Info nor
	// Brief: they never change once parked, and the executor that
	// finishes has them from its Claim (the call returned with ErrLapsed
	// has them: its end is reported).
	Finish(ctx context.Context, id string, fence int64, to State, res Result) (Call, error)

	// FinishDeliver is Finish and then, when Finish succeeds, Deliver, as
	// one step: for the executor that holds its caller's request, which
	// hands the result over itself. The call it returns was delivered
	// (Deliver's first is true for this caller); on an error it was not.
	FinishDeliver(ctx context.Context, id string, fence int64, to State, res Result) (Call, error)

	// Deliver marks a finished call's outcome (its result, or its
	// rejection or expiry: any terminal call) as handed to its caller.
	// first is true for exactly one caller; from then on the call no
	// longer attaches retries. A call not yet terminal gives a
	// *StateError.
	Deliver(ctx context.Context, id string) (first bool, c Call, err error)

	// Expire moves Waiting and Approved calls past their expiry to Expired
	// and Executing calls past their lease to Unknown, at most limit of
	// them, and returns the calls it changed, with an error those it
	// changed before the error.
	Expire(ctx context.Context, limit int) ([]Call, error)

	// Approved returns up to limit calls Approved at least grace ago and
	// not yet claimed (for the sweeper: nobody is holding them). Each
	// has at least its ID, State, Upstream, ExpiresAt, DecidedAt and
	// CreatedAt; a store may leave the rest out (Claim returns the
	// whole call).
	Approved(ctx context.Context, grace time.Duration, limit int) ([]Call, error)

	// List returns up to limit calls in state s, oldest first: earliest
	// to enter s or, for waiting calls, earliest to expire (the order
	// they were parked in while pending.ttl stays the same).
	List(ctx context.Context, s State, limit int) ([]Call, error)

	// ListBrief is List for lists that people read: up to limit calls in
	// state s, newest first (latest to enter s, or for waiting calls
	// latest to expire), skipping calls past their
	// deadline (expiry, or lease while executing). Each call has only ID,
	// State, Subject, Principal, Upstream, Tool, CreatedAt, ExpiresAt,
	// Quorum, Approvals, DecidedBy and Brief: never Request, Info or
	// Result, which may be large, so that a list costs the store little
	// whatever the calls carry.
	ListBrief(ctx context.Context, s State, limit int) ([]Call, error)

	// Count returns how many calls are in state s, without reading them
	// (the calls-waiting gauge, read at every scrape).
	Count(ctx context.Context, s State) (int, error)

	// Wait blocks until the call's state is no longer from, or ctx ends
	// (then it returns ctx's error and the call as it stands, or a zero
	// Call when the store cannot be read on a moment of its own). Wake-ups
	// may be lost (Redis pub/sub); implementations also poll.
	Wait(ctx context.Context, id string, from State) (Call, error)

	// WaitHeld is Wait for the request held on the call, whose next step
	// after an approval is Claim (which checks the state itself and
	// returns the call whole), and after a claim a wait for the call's
	// end: a call that moved to Approved or Executing may come back with
	// its ID and State alone, so that a store told of the move need not
	// read the call. Any other call comes back as from Wait.
	WaitHeld(ctx context.Context, id string, from State) (Call, error)

	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error

	// Announced records that the calls' "requested" notifications
	// reached their approvers (or were given up after being attempted),
	// so Unannounced no longer returns them: one request for them all. It
	// is idempotent, and skips calls it does not find.
	Announced(ctx context.Context, ids []string) error

	// Unannounced returns up to limit Waiting calls parked at least
	// olderThan ago (by the store's clock), not past their expiry, and
	// not marked Announced, oldest first: the calls whose announcement
	// may have been lost, to be announced again. When maxBytes is
	// positive, the calls returned hold at most that many bytes in all
	// (their stored records: a megabyte of arguments is a megabyte read),
	// but the first due is returned whatever its size. A store in shards
	// lists each shard's oldest first, one shard after another, and starts
	// a listing bounded in bytes at another shard each time.
	Unannounced(ctx context.Context, olderThan time.Duration, limit int, maxBytes int64) ([]Call, error)

	// Resolved records that the "resolved" notifications of these ends
	// reached their approvers (or were given up after being attempted),
	// so Unresolved no longer returns them: one request for them all. It
	// is idempotent, and skips ends it does not hold.
	Resolved(ctx context.Context, ends []End) error

	// Unresolved returns up to limit ends reached at least olderThan ago
	// (by the store's clock) and not marked Resolved, oldest first, each
	// with its call as it stands now: the "resolved" notifications that
	// may have been lost, to be sent again. The store records an end in
	// the same step as the transition (written with the call, as the
	// call's park records its "requested" notification), and keeps it
	// while it keeps the call, at most EndsKept (or ResultTTL) after the end.
	// maxBytes bounds the calls returned as it does for Unannounced.
	Unresolved(ctx context.Context, olderThan time.Duration, limit int, maxBytes int64) ([]Owed, error)

	// BindSession records principal as the owner of the MCP session id
	// until the store's now + ttl, unless an owner is recorded already
	// (SET NX). When principal is the owner, recorded now or before, the
	// binding lasts ttl from now. It returns the owner as recorded: another
	// principal's binding is neither replaced nor prolonged. principal may
	// carry a note after a NUL (SplitOwner); owners are compared without
	// it.
	BindSession(ctx context.Context, id, principal string, ttl time.Duration) (owner string, err error)

	// TouchSession is BindSession for a session that must be known
	// already: it records nothing, and gives ErrNotFound when the session
	// has no owner (never bound, or its binding expired).
	TouchSession(ctx context.Context, id, principal string, ttl time.Duration) (owner string, err error)

	// SessionOwner returns the owner of the MCP session id, or
	// ErrNotFound. It only reads.
	SessionOwner(ctx context.Context, id string) (string, error)

	// EndSession forgets the binding of the MCP session id when principal
	// owns it (its upstream ended the session), and stops counting it
	// against principal's cap. Another principal's binding, or none, is
	// left as it is; it is not an error.
	EndSession(ctx context.Context, id, principal string) error

	// SessionRoom reports whether principal holds fewer live session
	// bindings than Options.MaxSessionsPerPrincipal: whether a session
	// opened for it now could be bound. It is asked before a session is
	// opened, and binds nothing: BindSession still counts the binding.
	SessionRoom(ctx context.Context, principal string) (bool, error)
}
