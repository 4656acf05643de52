package main

import (
	"context"
	"errors"

	opacmd "github.com/open-policy-agent/opa/cmd"
)

// cmdOPA runs the OPA command line embedded in toolgate (test, fmt, check,
// eval, build, ...), at exactly the OPA version toolgate decides with, so
// policy authors need no separate opa binary. Note: unlike `toolgate policy
// test`, it does not load toolgate's shipped library.
func cmdOPA(ctx context.Context, args []string, e env) int {
	root := opacmd.Command(nil, "OPA")
	root.Use = "toolgate opa"
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		// OPA's own exit status (opa test: 2 when a test fails), as the
		// opa binary gives it. OPA's commands (and cobra, of a bad flag)
		// have said what went wrong; the opa binary says nothing more.
		var exit *opacmd.ExitError
		if errors.As(err, &exit) {
			return exit.Exit
		}
		return exitFail
	}
	return exitOK
}
