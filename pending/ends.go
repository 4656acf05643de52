package pending

import "time"

// An End is a transition approvers are told of by a "resolved"
// notification: a decision (Approved, Rejected, Cancelled), or an end
// nobody decided (Expired, Unknown) of a call waiting, approved, or whose
// executor was lost. A call has at most two: approved, then expired or
// lost before it ran. An executor's own Finish is not one: the decision
// before it was announced, and its result goes to the agent.
type End struct {
	ID    string
	State State // the state the call moved to
}

// Owed is an End whose notification is not recorded as settled, with its
// call as it stands now (which may have moved on since: an approved call
// runs).
type Owed struct {
	End
	Call Call
}

// EndsKept is how long a store owes an end its notification at most
// (ResultTTL when shorter): past it, Unresolved no longer returns it. A
// notification that every target delivered or gave up settles within
// minutes; an end unsettled for an hour has no replica sending it (none
// has notification targets, or none runs), and keeping it longer would
// grow the index by every call that ends.
const EndsKept = time.Hour

// endsKeptMS is EndsKept for the scripts (TestEndsKeptMS).
const endsKeptMS = "3600000"

// announcedEnd reports whether a move to st, other than an executor's
// Finish, is an End.
func announcedEnd(st State) bool {
	switch st {
	case Approved, Rejected, Cancelled, Expired, Unknown:
		return true
	}
	return false
}
