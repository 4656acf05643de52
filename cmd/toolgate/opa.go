package main

import (
	"context"
	"errors"
	"fmt"

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
		// opa binary would give it; it has said what went wrong.
		var exit *opacmd.ExitError
		if errors.As(err, &exit) {
			if w := errors.Unwrap(exit); w != nil {
				fmt.Fprintf(e.stderr, "toolgate opa: %v\n", w)
			}
			return exit.Exit
		}
		fmt.Fprintf(e.stderr, "toolgate opa: %v\n", err)
		return exitFail
	}
	return exitOK
}
