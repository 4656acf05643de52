package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// refusedBuiltins are the OPA built-ins a policy may not call unless
// Options.Capabilities names them, with what each would do: a decision must
// not reach the network or the host (docs/policy.md, what policies may
// do). Every other built-in of OPA stays available: the pure ones, and
// those whose only input from outside is the clock or randomness
// (time.now_ns, io.jwt.decode_verify, rand.intn, uuid.rfc4122).
var refusedBuiltins = map[string]string{
	"http.send":          "sends HTTP requests",
	"net.lookup_ip_addr": "makes DNS queries",
	"opa.runtime":        "reads the process's environment and configuration",
	// A schema's "$ref" may name a file:// URL, which OPA reads from the
	// host's file system whatever allow_net says.
	"json.match_schema":  "reads the files and URLs a schema's $ref names",
	"json.verify_schema": "reads the files and URLs a schema's $ref names",
}

// netBuiltins need OPA's allow_net to be open to work at all: listing one
// in Options.Capabilities lets policies reach every host.
var netBuiltins = []string{"http.send", "net.lookup_ip_addr"}

// capabilities are OPA's capabilities of this version without the refused
// built-ins, except those extra names. An extra name that is not one of
// OPA's built-ins is an error. Unless a network built-in is allowed,
// allow_net is empty, so nothing a policy calls fetches from the network.
func capabilities(extra []string) (*ast.Capabilities, error) {
	caps := ast.CapabilitiesForThisVersion()
	known := make(map[string]bool, len(caps.Builtins))
	for _, b := range caps.Builtins {
		known[b.Name] = true
	}
	var unknown []string
	for _, name := range extra {
		if !known[name] {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("policy.capabilities: %s %s not one of OPA's built-ins", strings.Join(unknown, ", "), plural(len(unknown), "is", "are"))
	}
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		_, refused := refusedBuiltins[b.Name]
		return refused && !slices.Contains(extra, b.Name)
	})
	caps.AllowNet = []string{}
	if slices.ContainsFunc(netBuiltins, func(n string) bool { return slices.Contains(extra, n) }) {
		caps.AllowNet = nil // every host
	}
	return caps, nil
}

// explainRefused rewrites the compiler's "undefined function" errors for
// refused built-ins so that they say why and how to allow one; each keeps
// its file and line.
func explainRefused(errs ast.Errors) ast.Errors {
	for _, e := range errs {
		name, ok := strings.CutPrefix(e.Message, "undefined function ")
		if !ok {
			continue
		}
		if why, refused := refusedBuiltins[name]; refused {
			e.Message = fmt.Sprintf("built-in %s is not allowed in policies (it %s); list %q in policy.capabilities to allow it", name, why, name)
		}
	}
	return errs
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
