package pending

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Decision is one approver's answer to a waiting call.
type Decision struct {
	To      State  // Approved or Rejected
	By      string // who decided: an approver's identity
	Comment string
	// Counts lists the entries of the call's Quorum this approval counts
	// towards (the requirements whose approvers include By). Ignored for a
	// rejection and for a call without a Quorum. The caller decides
	// eligibility; the store only counts.
	Counts []int
}

// Approval is one approver's approval of a call, as Decide recorded it.
type Approval struct {
	By      string
	At      time.Time
	Comment string
	Counts  []int // the Quorum entries it counts towards
}

// maxQuorum bounds a call's requirements and the approvals one needs: a
// policy cannot make a call that no store can hold or no group can reach.
const (
	maxQuorum   = 16
	maxApprover = 64
)

// quorumMet reports whether approvals satisfy every entry of quorum: entry
// i is met when at least quorum[i] distinct approvals count towards i.
// An empty quorum is met by any one approval.
func quorumMet(quorum []int, approvals []Approval) bool {
	if len(quorum) == 0 {
		return len(approvals) > 0
	}
	for i, need := range quorum {
		n := 0
		for _, a := range approvals {
			if slices.Contains(a.Counts, i) {
				n++
			}
		}
		if n < need {
			return false
		}
	}
	return true
}

// ApprovedBy reports whether by has an approval among approvals. Names are
// compared ignoring ASCII case, as the Redis script compares them, so that
// "Erin" by key and "erin" by sign-in are one approver, not two. Decide
// counts approvers by it; callers that show "already approved" use it too.
func ApprovedBy(approvals []Approval, by string) bool {
	return slices.ContainsFunc(approvals, func(a Approval) bool { return asciiEqualFold(a.By, by) })
}

// full reports whether a call holds as many approvals as any call may
// (maxApprover): further approvals are not recorded, so no approver can
// grow a call without bound.
func full(approvals []Approval) bool { return len(approvals) >= maxApprover }

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func checkQuorum(c Call) error {
	if len(c.Quorum) > maxQuorum {
		return fmt.Errorf("%w: call %s has %d approval requirements, at most %d", errInvalid, c.ID, len(c.Quorum), maxQuorum)
	}
	for _, n := range c.Quorum {
		if n < 1 || n > maxApprover {
			return fmt.Errorf("%w: call %s needs %d approvals for one requirement; from 1 to %d", errInvalid, c.ID, n, maxApprover)
		}
	}
	return nil
}

func checkDecisionOf(d Decision) error {
	if err := checkDecision(d.To); err != nil {
		return err
	}
	if d.By == "" && d.To == Approved {
		return fmt.Errorf("%w: an approval needs an approver", errInvalid)
	}
	for _, i := range d.Counts {
		if i < 0 || i >= maxQuorum {
			return fmt.Errorf("%w: an approval counts towards requirement %d", errInvalid, i)
		}
	}
	return nil
}

// The Redis forms: Quorum as "2,1" (field qm), Counts the same, and the
// approvals as a JSON list of {b, t, c, n} with t in milliseconds (field
// ap), which the decide script reads and extends with cjson.

func encodeInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func decodeInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

type redisApproval struct {
	B string `json:"b"`
	T string `json:"t"`
	C string `json:"c"`
	N string `json:"n"`
}

func decodeApprovals(s string) ([]Approval, error) {
	// cjson writes an empty list as {}.
	if s == "" || s == "{}" {
		return nil, nil
	}
	var raw []redisApproval
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, err
	}
	out := make([]Approval, 0, len(raw))
	for _, r := range raw {
		ms, err := strconv.ParseInt(r.T, 10, 64)
		if err != nil {
			return nil, err
		}
		n, err := decodeInts(r.N)
		if err != nil {
			return nil, err
		}
		out = append(out, Approval{By: r.B, At: time.UnixMilli(ms), Comment: r.C, Counts: n})
	}
	return out, nil
}
