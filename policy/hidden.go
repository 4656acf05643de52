package policy

// Hidden stands in the input document, and in what is logged of it, for
// each value of a header that carries a credential, or an argument's value
// where arguments are not logged.
const Hidden = "[hidden]"

// HiddenValues is n Hidden, shared: nothing changes an input's header
// values.
func HiddenValues(n int) []string {
	if n <= len(hiddenRun) {
		return hiddenRun[:n:n]
	}
	vs := make([]string, n)
	for i := range vs {
		vs[i] = Hidden
	}
	return vs
}

var hiddenRun = []string{Hidden, Hidden, Hidden, Hidden}
