package pending

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
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
	// Claim, when not zero, is the lease of a claim made in the same step
	// when this decision approves the call (completes its quorum): the
	// call moves on to Executing, as Claim would move it, and Decide
	// returns it whole, with its fence. For the replica that holds the
	// call's request: it runs the call next, and the claim would
	// otherwise cost the store a second transition and the request a
	// wake-up. Ignored for a rejection and for an approval that leaves
	// the call waiting, and by a store whose transitions wait for
	// replicas to confirm them (Options.MinReplicas): the call then
	// stays Approved, for the holder's own Claim.
	Claim time.Duration
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
	if d.Claim < 0 {
		return checkLease(d.Claim)
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
	// Cut, not Split: no slice of the parts besides the numbers'.
	out := make([]int, 0, strings.Count(s, ",")+1)
	for {
		p, rest, more := strings.Cut(s, ",")
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
		if !more {
			return out, nil
		}
		s = rest
	}
}

type redisApproval struct {
	B string `json:"b"`
	T string `json:"t"`
	C string `json:"c"`
	N string `json:"n"`
}

// decodeApprovals decodes the field ap. What cjson writes is read by
// scanApprovals, without encoding/json's reflection (some thirty
// allocations an approval); anything else, by encoding/json, whose results
// and errors scanApprovals only ever repeats (FuzzDecodeApprovals).
func decodeApprovals(s string) ([]Approval, error) {
	// cjson writes an empty list as {}.
	if s == "" || s == "{}" {
		return nil, nil
	}
	if out, ok := scanApprovals(s); ok {
		return out, nil
	}
	return decodeApprovalsJSON(s)
}

func decodeApprovalsJSON(s string) ([]Approval, error) {
	var raw []redisApproval
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, err
	}
	out := make([]Approval, 0, len(raw))
	for _, r := range raw {
		a, err := r.approval()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (r redisApproval) approval() (Approval, error) {
	ms, err := strconv.ParseInt(r.T, 10, 64)
	if err != nil {
		return Approval{}, err
	}
	n, err := decodeInts(r.N)
	if err != nil {
		return Approval{}, err
	}
	return Approval{By: r.B, At: time.UnixMilli(ms), Comment: r.C, Counts: n}, nil
}

// scanApprovals decodes s if it is what cjson.encode makes of a non-empty
// list of approvals: [{"b":"…","t":"…","c":"…","n":"…"},…], with no
// space, the keys in any order, each value a string. ok is false for
// anything else, and for what would be an error (encoding/json then
// decodes s, and says why): a key of another spelling, a number, null,
// space, a surrogate escape, bytes not UTF-8, a t or n not numbers.
func scanApprovals(s string) (out []Approval, ok bool) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, false
	}
	// one allocation for the usual list; a comment holding },{ only
	// makes room for more
	out = make([]Approval, 0, strings.Count(s, "},{")+1)
	i := 1
	for {
		var r redisApproval
		if i, ok = scanApproval(s, i, &r); !ok {
			return nil, false
		}
		a, err := r.approval()
		if err != nil {
			return nil, false
		}
		out = append(out, a)
		switch {
		case i == len(s)-1: // the closing ]
			return out, true
		case i < len(s) && s[i] == ',':
			i++
		default:
			return nil, false
		}
	}
}

// scanApproval reads one approval at s[i:] into r, and says where it ends.
func scanApproval(s string, i int, r *redisApproval) (int, bool) {
	if i >= len(s) || s[i] != '{' {
		return i, false
	}
	i++
	if i < len(s) && s[i] == '}' {
		return i + 1, true
	}
	for {
		// a key is one of four letters
		if i+4 > len(s) || s[i] != '"' || s[i+2] != '"' || s[i+3] != ':' {
			return i, false
		}
		var v *string
		switch s[i+1] {
		case 'b':
			v = &r.B
		case 't':
			v = &r.T
		case 'c':
			v = &r.C
		case 'n':
			v = &r.N
		default:
			return i, false
		}
		var ok bool
		// a key given twice: the last value, as encoding/json keeps it
		if *v, i, ok = scanString(s, i+4); !ok || i >= len(s) {
			return i, false
		}
		switch s[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// scanString reads the JSON string at s[i:] and says where it ends. A
// string without escapes is s's own bytes, not a copy: s is a field of
// one call, which the call keeps anyway.
func scanString(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", i, false
	}
	i++
	start, ascii := i, true
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			v := s[start:i]
			if !ascii && !utf8.ValidString(v) {
				return "", i, false // encoding/json replaces such bytes
			}
			return v, i + 1, true
		case c == '\\':
			return unescape(s, start, i, ascii)
		case c < 0x20:
			return "", i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", i, false
}

// unescape reads the rest of a JSON string begun at s[start:] whose first
// escape is at s[i]; ascii is whether the bytes before it are.
func unescape(s string, start, i int, ascii bool) (string, int, bool) {
	b := make([]byte, 0, len(s)-start)
	b = append(b, s[start:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			if !ascii && !utf8.ValidString(s[start:i]) {
				return "", i, false
			}
			return string(b), i + 1, true
		case c < 0x20:
			return "", i, false
		case c != '\\':
			ascii = ascii && c < utf8.RuneSelf
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", i, false
		}
		if k := strings.IndexByte(`"\/bfnrt`, s[i+1]); k >= 0 {
			b = append(b, "\"\\/\b\f\n\r\t"[k])
			i += 2
			continue
		}
		if s[i+1] != 'u' || i+6 > len(s) {
			return "", i, false
		}
		r, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
		if err != nil || utf16.IsSurrogate(rune(r)) {
			return "", i, false
		}
		b = utf8.AppendRune(b, rune(r))
		i += 6
	}
	return "", i, false
}
