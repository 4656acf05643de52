package policy

import (
	"fmt"
	"slices"
	"strings"
)

// ControlError reports a control character where toolgate refuses one.
type ControlError struct {
	What  string // "argument key" or "target"
	Value string // the key or the target string
}

func (e *ControlError) Error() string {
	i := strings.IndexFunc(e.Value, isC0)
	return fmt.Sprintf("%s %q holds the control character U+%04X", e.What, e.Value, e.Value[i])
}

// CheckControl refuses arguments that a tool server could read otherwise
// than the policy does: a key, at any depth, or a target string (a string
// argument whose name, matched as NewTool matches it, is in targetArgs, or
// any string inside such an argument)
// holding NUL or another C0 control character (U+0000 to U+001F). String
// values other than targets may hold them (text with newlines). When
// several do, the error names the first in byte order, so that it does not
// depend on map order. The error is a *ControlError.
func CheckControl(args map[string]any, targetArgs []string) error {
	var worst *ControlError
	note := func(what, v string) {
		if strings.IndexFunc(v, isC0) >= 0 && (worst == nil || v < worst.Value) {
			worst = &ControlError{What: what, Value: v}
		}
	}
	checkKeys(args, note)
	if worst != nil {
		return worst
	}
	for name, v := range args {
		if !isTargetArg(name, targetArgs) {
			continue
		}
		// Every string inside: a target, an array's, or one inside an
		// opaque value, which NewTool reads for escaping paths.
		var strs func(v any)
		strs = func(v any) {
			switch v := v.(type) {
			case string:
				note("target", v)
			case []any:
				for _, e := range v {
					strs(e)
				}
			case map[string]any:
				for _, e := range v {
					strs(e)
				}
			}
		}
		strs(v)
	}
	if worst != nil {
		return worst
	}
	return nil
}

// checkKeys passes every object key under v to note.
func checkKeys(v any, note func(what, v string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			note("argument key", k)
			checkKeys(x, note)
		}
	case []any:
		for _, x := range v {
			checkKeys(x, note)
		}
	}
}

func isC0(r rune) bool { return r < 0x20 }

// CheckTargets refuses a call that names more than MaxTargets targets
// (strings and other values in the arguments named in targetArgs, an
// array's items each counting): the rules table matches every target, so
// their number bounds the work of a decision, and a target past the bound
// would be one the policy never read.
func CheckTargets(args map[string]any, targetArgs []string) error {
	n := 0
	for name, v := range args {
		if !isTargetArg(name, targetArgs) {
			continue
		}
		switch v := v.(type) {
		case nil:
		case []any:
			for _, e := range v {
				if e != nil {
					n++
				}
			}
		default:
			n++
		}
	}
	if n > MaxTargets {
		return fmt.Errorf("the call names %d targets (values of the arguments in target_args); at most %d", n, MaxTargets)
	}
	return nil
}

// isTargetArg reports whether the argument called name is one of
// targetArgs, matched as NewTool matches it (case-insensitively).
func isTargetArg(name string, targetArgs []string) bool {
	return slices.ContainsFunc(targetArgs, func(k string) bool { return strings.EqualFold(name, k) })
}
