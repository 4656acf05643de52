package kubestrict

import "strings"

// Selects reports whether a selector matches a pod's labels; an empty
// selector matches nothing here (the manifests never mean "every pod").
func Selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// FlagValue is the value after flag in a container's args ("--config
// FILE" or "--config=FILE"), or "".
func FlagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}
