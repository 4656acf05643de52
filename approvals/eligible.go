package approvals

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// eligible says whether who may make decision to on c, and which of c's
// approval requirements (callinfo.Info.Approvers, pending.Call.Quorum)
// their approval counts towards. who is nil for a link opened without an
// identity.
//
//   - A call whose ask reasons name no approvers, or only the requester,
//     may be decided by anyone the listener lets decide: a link token, an
//     API key, a signed-in approver. Their approval counts towards every
//     requirement.
//   - A call whose reasons name groups or subjects may be decided only by
//     a known approver who is eligible for at least one of them (one of
//     its subjects, or a member of one of its groups); the approval counts
//     towards each requirement the approver is eligible for, and towards
//     those that name only the requester. The first eligible rejection
//     rejects.
//   - The requester, through the confirmation page, counts only towards
//     requirements that name nobody but the requester: a confirmation
//     never satisfies an ask that names other approvers, and decides
//     nothing on a call another ask reason (one naming nobody, or a
//     hook's) left to an approver.
//   - A link without an identity does not approve a call that needs more
//     than one approval; it may reject it.
//   - Nobody approves their own call; rejecting it is allowed.
func eligible(c pending.Call, info callinfo.Info, who *signin.Approver, to pending.State) ([]int, error) {
	if who != nil && who.Via == viaRequester {
		counts := requirements(info, func(a callinfo.Approvers) bool { return a.RequesterOnly() })
		if len(counts) == 0 || info.OpenAsk || info.HookAsked {
			return nil, errNotEligible
		}
		return counts, nil
	}
	if who != nil && to == pending.Approved && ownCall(who.Name, c) {
		return nil, errSelfApproval
	}
	if who == nil && to == pending.Approved && needed(c) > 1 {
		// A quorum counts distinct names, and a link has none: its holder
		// could approve again by key, by Slack or signed in, and count twice.
		return nil, errQuorumNeedsIdentity
	}
	if !info.NamesApprovers() {
		return requirements(info, func(callinfo.Approvers) bool { return true }), nil
	}
	if who == nil {
		return nil, errNeedsIdentity
	}
	if len(requirements(info, func(a callinfo.Approvers) bool { return eligibleFor(a, who) })) == 0 {
		return nil, errNotEligible
	}
	return requirements(info, func(a callinfo.Approvers) bool { return a.Open() || eligibleFor(a, who) }), nil
}

// requirements is the indices of info's requirements that count says an
// approval counts towards; nil when none does.
func requirements(info callinfo.Info, count func(callinfo.Approvers) bool) []int {
	var idx []int
	for i, a := range info.Approvers {
		if count(a) {
			idx = append(idx, i)
		}
	}
	return idx
}

// eligibleFor reports whether who is one of a's subjects or in one of its
// groups. Names and groups are compared exactly: an identity source that
// spells them another way is a configuration to fix, not one to guess.
func eligibleFor(a callinfo.Approvers, who *signin.Approver) bool {
	if slices.Contains(a.Subjects, who.Name) {
		return true
	}
	for _, g := range who.Groups {
		if slices.Contains(a.Groups, g) {
			return true
		}
	}
	return false
}

// mayDecide reports whether who may make some decision on c: what the
// inbox lists and whether a page shows the form.
func mayDecide(c pending.Call, info callinfo.Info, who *signin.Approver) bool {
	if who != nil && ownCall(who.Name, c) {
		return false // an approver's own call: only a rejection is left to them, from its link
	}
	if _, err := eligible(c, info, who, pending.Rejected); err != nil {
		return false
	}
	return who == nil || !approvedBy(c, who.Name)
}

// approvedBy reports whether name has approved c; names are compared
// ignoring case, as the store counts them.
func approvedBy(c pending.Call, name string) bool {
	return pending.ApprovedBy(c.Approvals, name)
}

// ownCall reports whether approver is the subject of c: its subject, or
// the subject its principal's credential names (a JWT's claim before a
// configured prefix). Case is ignored: refusing "Alice" on alice's call
// errs on the safe side.
func ownCall(approver string, c pending.Call) bool {
	// Composed first: a subject spelled with combining marks is the same
	// person as the approver's composed name.
	approver = norm.NFC.String(approver)
	if strings.EqualFold(approver, norm.NFC.String(c.Subject)) {
		return true
	}
	s := identity.PrincipalSubject(c.Principal)
	return s != "" && strings.EqualFold(approver, norm.NFC.String(s))
}

// progress says how far a call with a quorum is: "1 of 2 approvals", one
// clause per requirement when there are several. Empty for a call that one
// approval decides.
func progress(c pending.Call, info callinfo.Info) string {
	if len(c.Quorum) == 0 || (len(c.Quorum) == 1 && c.Quorum[0] <= 1) {
		return ""
	}
	parts := make([]string, 0, len(c.Quorum))
	for i, need := range c.Quorum {
		have := 0
		for _, a := range c.Approvals {
			if slices.Contains(a.Counts, i) {
				have++
			}
		}
		p := fmt.Sprintf("%d of %d %s", min(have, need), need, plural(need, "approval", "approvals"))
		if len(c.Quorum) > 1 && i < len(info.Approvers) {
			p = approverLabel(info.Approvers[i]) + ": " + p
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// approversOf is who may approve c, for the page: one clause per
// requirement.
func approversOf(info callinfo.Approvers) string {
	switch {
	case info.RequesterOnly():
		return "the requester, or any approver"
	case info.Open():
		return "any approver"
	}
	return approversText(info.Groups, info.Subjects, info.Min)
}

func approverLabel(a callinfo.Approvers) string {
	if a.Reason != "" {
		return a.Reason
	}
	return approversOf(a)
}

// needed is the approvals a call needs, for summaries: the largest of its
// requirements (0 for a call that one approval decides).
func needed(c pending.Call) int {
	n := 0
	for _, q := range c.Quorum {
		n = max(n, q)
	}
	if n <= 1 && len(c.Quorum) <= 1 {
		return 0
	}
	return n
}
