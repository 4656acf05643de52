package policy

import (
	"errors"
	"regexp"
	"strings"

	"github.com/open-policy-agent/opa/v1/topdown"
)

// hiddenDetail stands where an evaluation error's detail was cut.
const hiddenDetail = "(detail hidden: it may quote the call's input; log.arguments shows it)"

// redactEvalError returns err as the engine hands it on when
// Options.ErrorDetail is off. OPA's built-in functions quote their
// operands in their errors (`to_number: strconv.ParseFloat: parsing
// "…"`), and an operand is often one of the call's arguments, which the
// logs, the decision log and the traces keep only with log.arguments. The
// error's code, its location (the policy's own text, where an author
// looks), the built-in's or the rule's name stay; the rest goes. Only a
// cancellation (a timeout) names no value and stays whole.
func redactEvalError(err error) error {
	var te *topdown.Error
	if !errors.As(err, &te) {
		return quotedHidden(err)
	}
	if te.Code == topdown.CancelErr {
		return err
	}
	msg := hiddenDetail
	head, _, cut := strings.Cut(te.Message, ":")
	switch te.Code {
	case topdown.BuiltinErr, topdown.TypeErr:
		// A built-in's message starts with its name: "to_number: …".
		if cut && isBuiltinName(head) {
			msg = head + ": " + hiddenDetail
		}
	case topdown.ConflictErr:
		// "rule data.x produced conflicting values:" and then the values,
		// which may be the input's; the fixed messages have no colon.
		if cut {
			msg = head + ": " + hiddenDetail
		} else {
			msg = te.Message
		}
	}
	return &evalError{&topdown.Error{Code: te.Code, Message: msg, Location: te.Location}}
}

// quoted is a Go-quoted string (%q) in an error's text.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// quotedHidden is err with every quoted string in its text cut: the
// engine's own errors about a result of the wrong shape quote what the
// policy gave (an approvers key, an action), which a rule may have taken
// from the input.
func quotedHidden(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, `"`) {
		return err
	}
	cut := quoted.ReplaceAllStringFunc(msg, func(q string) string {
		if ownWords[q] {
			return q
		}
		return `"(hidden)"`
	})
	return &cutError{msg: cut, err: err}
}

// ownWords are the quoted words of the engine's own messages (a reason
// object needs a string "message"): names of the decision's members, not
// values.
var ownWords = map[string]bool{`"approvers"`: true, `"id"`: true, `"message"`: true, `"must_ask"`: true}

// cutError is an error whose text was cut; errors.Is and errors.As still
// see the original.
type cutError struct {
	msg string
	err error
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }

// isBuiltinName reports whether s reads as a built-in function's name
// (letters, digits, '_' and '.'), so that no quoted text passes as one.
func isBuiltinName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// evalError is a redacted evaluation error. It does not unwrap to the
// original, whose text holds what was cut.
type evalError struct{ te *topdown.Error }

func (e *evalError) Error() string { return "policy: evaluating: " + e.te.Error() }
