// Command toolgate is a reverse-proxy sidecar that decides every AI-agent
// tool call with OPA Rego policies before it reaches the tool. This package
// is the only one that knows every other: it reads the configuration, wires
// the policy engine, the identity check and the proxy together, and runs
// the listeners.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	opaversion "github.com/open-policy-agent/opa/v1/version"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// buildCommit is the commit set at build time, or else the one the Go
// toolchain recorded (a go build in a checkout), "-dirty" when the tree
// had changes.
func buildCommit() string {
	if commit != "unknown" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return commit
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return commit
	case dirty:
		return rev + "-dirty"
	}
	return rev
}

// Exit statuses (README, Running it).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// env is what a command receives from the process: its environment and
// output streams.
type env struct {
	environ        []string
	stdout, stderr io.Writer
}

func (e env) getenv(name string) string {
	for i := len(e.environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(e.environ[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

// run runs the command named by args[0] and returns the exit status.
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) int {
	e := env{environ: environ, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, e)
	case "quickstart":
		return cmdQuickstart(ctx, rest, e)
	case "policy":
		return cmdPolicy(ctx, rest, e)
	case "config":
		return cmdConfig(ctx, rest, e)
	case "healthcheck":
		return cmdHealthcheck(ctx, rest, e)
	case "version":
		if len(rest) == 1 && isHelp(rest[0]) {
			fmt.Fprintln(stdout, "usage: toolgate version (prints toolgate's version, commit, OPA and Go versions)")
			return exitOK
		}
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "toolgate version: unexpected argument %q (it takes none)\n", rest[0])
			return exitUsage
		}
		fmt.Fprintf(stdout, "toolgate %s (commit %s, OPA %s, %s)\n", version, buildCommit(), opaversion.Version, runtime.Version())
		return exitOK
	case "opa":
		return cmdOPA(ctx, rest, e)
	case "notes-server":
		return cmdNotesServer(ctx, rest, e)
	}
	if isHelp(cmd) {
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "toolgate: unknown command %q\n\n", cmd)
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolgate <command> [flags]

Commands:
  serve --config FILE                        run the sidecar
  quickstart                                 demo: toolgate in front of the example notes tools
  policy test [PATH...]                      run Rego unit tests (shipped library included)
  policy eval --config FILE --input FILE     print the decision for an input document
  config validate --config FILE [--strict]   check a config and print it, secrets redacted
  healthcheck [--url URL] [--timeout D]      exit 0 when the admin /readyz answers 200
  version                                    print version, commit, OPA and Go versions
  opa <command> [args]                       the OPA command line at toolgate's OPA version (fmt, check, eval, ...)
  notes-server [--listen ADDR]               run the example notes tool server alone

Run 'toolgate <command> -h' for a command's flags.
`)
}

// isHelp reports whether arg asks for help rather than naming something.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// parseFlags parses a command's flags; -h prints them and is not an error.
func parseFlags(fs *flag.FlagSet, args []string, e env) (ok bool, status int) {
	return parseFlagsArgs(fs, args, e, false)
}

// parseFlagsArgs is parseFlags for a command that takes arguments after
// its flags (positional); without, any is bad usage rather than ignored.
func parseFlagsArgs(fs *flag.FlagSet, args []string, e env, positional bool) (ok bool, status int) {
	// The flag package writes its usage on errors and on -h alike; asked
	// for, it is the answer (stdout), else part of the error (stderr).
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(e.stderr)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = e.stdout.Write(out.Bytes())
		return false, exitOK
	}
	_, _ = e.stderr.Write(out.Bytes())
	if err != nil {
		return false, exitUsage
	}
	if !positional && fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "%s: unexpected argument %q (flags only)\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return false, exitUsage
	}
	return true, 0
}
