package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/examples/notes"
	"github.com/toolgate/toolgate/internal/config"
)

// cmdConfig runs `toolgate config validate`. It refuses what serve refuses,
// in the same words: the configuration is loaded as serve loads it, then
// everything serve builds is built (policy engine, identity, store client,
// approval links, notifier, decision log, proxy), listening on nothing, and
// closed again. Like serve, it does not need Redis to answer.
func cmdConfig(ctx context.Context, args []string, e env) int {
	const use = "usage: toolgate config validate --config FILE [--strict]\n('toolgate config validate -h' lists its flags)"
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(e.stdout, use)
		return exitOK
	}
	if len(args) == 0 || args[0] != "validate" {
		fmt.Fprintln(e.stderr, use)
		return exitUsage
	}
	cf := newConfigFlags("config validate")
	strict := cf.fs.Bool("strict", false, "exit 2 on a warning too (a policy rule that cannot decide a call, a loopback trusted source): for CI gates")
	if ok, status := parseFlags(cf.fs, args[1:], e); !ok {
		return status
	}
	cfg, err := cf.load(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate: configuration refused:\n%v\n", err)
		return exitUsage
	}
	a, err := newApp(ctx, cfg, policySourceOf(cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate: configuration refused: toolgate serve would not start: %v\n", err)
		return exitUsage
	}
	revision := a.engine.Revision()
	warned := false
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(e.stderr, "toolgate: warning: %s\n", w)
		warned = true
	}
	if err := a.engine.Misshapen(); err != nil {
		// serve starts on it, and denies every call these rules reach.
		fmt.Fprintf(e.stderr, "toolgate: warning: every call these rules reach is denied as a policy error:\n%v\n", err)
		warned = true
	}
	for _, u := range a.engine.Unread() {
		fmt.Fprintf(e.stderr, "toolgate: warning: %s\n", u)
		warned = true
	}
	_ = a.Close(context.Background())
	if warned && *strict {
		fmt.Fprintln(e.stderr, "toolgate: configuration refused: warnings, and --strict")
		return exitUsage
	}
	out, err := cfg.Redacted()
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(e.stdout, "# valid; policy revision %s\n%s", revision, out)
	return exitOK
}

// cmdHealthcheck exits 0 when the URL (the admin /readyz) answers 200, for
// image health checks without curl.
func cmdHealthcheck(ctx context.Context, args []string, e env) int {
	fs := flag.NewFlagSet("toolgate healthcheck", flag.ContinueOnError)
	url := fs.String("url", readyzURL(e.getenv("TOOLGATE_LISTEN_ADMIN")), "URL that must answer 200 (default: /readyz of TOOLGATE_LISTEN_ADMIN, else of the default admin address)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if ok, status := parseFlags(fs, args, e); !ok {
		return status
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err == nil && (req.URL.Scheme != "http" && req.URL.Scheme != "https" || req.URL.Host == "") {
		err = fmt.Errorf("--url %q is not an http or https URL", *url)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate healthcheck: %v\n", err)
		return exitUsage
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate healthcheck: %v\n", err)
		return exitFail
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(e.stderr, "toolgate healthcheck: %s answered %s\n", *url, res.Status)
		return exitFail
	}
	return exitOK
}

// readyzURL is the /readyz URL of the admin listener at addr (as
// listen.admin spells it), reached on loopback when it listens on every
// address; addr "" is the default admin address.
func readyzURL(addr string) string {
	if addr == "" {
		addr = config.Default().Listen.Admin
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/readyz"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz"
}

// cmdNotesServer runs the example notes tool server alone (docker compose):
// REST tools at /, MCP at /mcp.
func cmdNotesServer(ctx context.Context, args []string, e env) int {
	fs := flag.NewFlagSet("toolgate notes-server", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:9001", "address to listen on")
	if ok, status := parseFlags(fs, args, e); !ok {
		return status
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate notes-server: %v\n", err)
		return exitFail
	}
	srv := &http.Server{Handler: notes.NewServer(notes.NewFiles()), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(e.stderr, "notes tool server listening on %s\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(e.stderr, "toolgate notes-server: %v\n", err)
		return exitFail
	}
	return exitOK
}
