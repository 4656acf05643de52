package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Approvers names who may approve an ask (docs/approvers.md): an approver
// who is one of Subjects or a member of one of Groups is eligible, and Min
// distinct eligible approvers must approve (0 means 1). Requester lets the
// caller confirm the call themselves; it is read and kept, and no approver
// satisfies it alone.
type Approvers struct {
	Groups    []string `json:"groups,omitempty" yaml:"groups"`
	Subjects  []string `json:"subjects,omitempty" yaml:"subjects"`
	Min       int      `json:"min,omitempty" yaml:"min"`
	Requester bool     `json:"requester,omitempty" yaml:"requester"`
}

// MaxApprovers bounds Approvers.Min: no policy may ask for a quorum that
// the store refuses to hold.
const MaxApprovers = 64

// maxApproverNames bounds the groups and subjects one reason names.
const maxApproverNames = 100

// Need is how many distinct approvals the reason asks for.
func (a *Approvers) Need() int { return max(a.Min, 1) }

// check refuses approvers nobody could satisfy or no store could hold.
func (a *Approvers) check() error {
	if len(a.Groups) == 0 && len(a.Subjects) == 0 && !a.Requester {
		return errors.New(`"approvers" names no groups, no subjects and not the requester`)
	}
	if len(a.Groups)+len(a.Subjects) > maxApproverNames {
		return fmt.Errorf(`"approvers" names more than %d groups and subjects`, maxApproverNames)
	}
	if slices.Contains(a.Groups, "") || slices.Contains(a.Subjects, "") {
		return errors.New(`"approvers" names an empty group or subject`)
	}
	if a.Min < 0 || a.Min > MaxApprovers {
		return fmt.Errorf(`"approvers" asks for min %d; from 1 to %d`, a.Min, MaxApprovers)
	}
	return nil
}

// approversOf reads a reason's "approvers" object as Rego produced it:
// {"groups": [string], "subjects": [string], "min": number,
// "requester": boolean}, every key optional, no other key.
func approversOf(x any) (*Approvers, error) {
	obj, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(`a reason's "approvers" must be an object, not %s`, typeOf(x))
	}
	a := &Approvers{}
	for k, v := range obj {
		var err error
		switch k {
		case "groups":
			a.Groups, err = stringList(k, v)
		case "subjects":
			a.Subjects, err = stringList(k, v)
		case "min":
			a.Min, err = wholeNumber(v)
		case "requester":
			var isBool bool
			if a.Requester, isBool = v.(bool); !isBool {
				err = errors.New(`"approvers.requester" must be a boolean`)
			}
		default:
			err = fmt.Errorf(`"approvers" has an unknown key %q (groups, subjects, min, requester)`, k)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return a, nil
}

func stringList(key string, v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(`"approvers.%s" must be an array of strings`, key)
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf(`"approvers.%s" must be an array of strings`, key)
		}
		out = append(out, s)
	}
	return out, nil
}

func wholeNumber(v any) (int, error) {
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, errors.New(`"approvers.min" must be a whole number`)
		}
	case float64:
		f = n
	case int:
		f = float64(n)
	default:
		return 0, errors.New(`"approvers.min" must be a whole number`)
	}
	if f != math.Trunc(f) || f < 0 || f > MaxApprovers {
		return 0, fmt.Errorf(`"approvers.min" must be a whole number from 1 to %d`, MaxApprovers)
	}
	return int(f), nil
}

// rulesData is the table row's approvers as Rego reads them back: only
// the keys that are set, so that both forms of the library read the same.
func (a *Approvers) rulesData() map[string]any {
	m := map[string]any{}
	if len(a.Groups) > 0 {
		m["groups"] = toAnys(a.Groups)
	}
	if len(a.Subjects) > 0 {
		m["subjects"] = toAnys(a.Subjects)
	}
	if a.Min != 0 {
		m["min"] = a.Min
	}
	if a.Requester {
		m["requester"] = true
	}
	return m
}

func toAnys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
