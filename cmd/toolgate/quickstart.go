package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/test/bufconn"

	"github.com/toolgate/toolgate/examples/notes"
	"github.com/toolgate/toolgate/internal/config"
	shipped "github.com/toolgate/toolgate/rego"
)

// cmdQuickstart runs toolgate in front of the built-in example notes tool
// server with the shipped example policy, and prints what to try.
func cmdQuickstart(ctx context.Context, args []string, e env) int {
	fs := flag.NewFlagSet("toolgate quickstart", flag.ContinueOnError)
	proxyAddr := fs.String("listen-proxy", "127.0.0.1:8080", "proxy address (a free port is taken if it is busy)")
	approvalsAddr := fs.String("listen-approvals", "127.0.0.1:8081", "approvals address (a free port is taken if it is busy)")
	adminAddr := fs.String("listen-admin", "127.0.0.1:9090", "admin address (a free port is taken if it is busy)")
	logLevel := fs.String("log-level", "info", "log level")
	if ok, status := parseFlags(fs, args, e); !ok {
		return status
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: levelOf(*logLevel)}))

	// The example tools listen in memory, on no port: a process beside
	// the agent (the agent itself, with a shell) cannot call them without
	// a decision, as it could a loopback port.
	toolLn := bufconn.Listen(1 << 20)
	toolSrv := &http.Server{Handler: notes.NewServer(notes.NewFiles()), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = toolSrv.Serve(toolLn) }()
	defer toolSrv.Close()

	cfg := config.Default()
	tools := "http://notes.invalid" // a name for the Host header; nothing resolves it
	// The same notes tools twice: REST at /, MCP at /mcp (the upstream's
	// own MCP endpoint is its /mcp).
	cfg.Upstreams = []config.Upstream{
		{Name: "notes", URL: tools},
		{Name: "notes-mcp", URL: tools + "/mcp", Protocol: "mcp", Prefix: "/mcp/", MCPPath: "/"},
	}
	cfg.Identity.Anonymous = true
	cfg.Approvals.Secret = config.Secret(randomSecret())
	cfg.Log.Level = *logLevel
	l := &listeners{}
	var err error
	for _, b := range []struct {
		addr string
		ln   *net.Listener
	}{{*proxyAddr, &l.proxy}, {*approvalsAddr, &l.approvals}, {*adminAddr, &l.admin}} {
		if *b.ln, err = listenOrAny(b.addr); err != nil {
			l.close()
			fmt.Fprintf(e.stderr, "toolgate: quickstart: %v\n", err)
			return exitFail
		}
	}
	cfg.Listen = config.Listen{Proxy: l.proxy.Addr().String(), Approvals: l.approvals.Addr().String(), Admin: l.admin.Addr().String()}
	cfg.PublicURL = ""
	cfg.ApplyDefaults()
	a, err := newApp(ctx, &cfg, policySource{fsys: shipped.Example()}, log,
		dialingUpstreams(func(ctx context.Context, _, _ string) (net.Conn, error) { return toolLn.DialContext(ctx) }))
	if err != nil {
		l.close()
		fmt.Fprintf(e.stderr, "toolgate: quickstart: %v\n", err)
		return exitFail
	}
	a.parking.onLink = func(id, link string) {
		fmt.Fprintf(e.stderr, "\n>>> call %s waits for approval. Open in a browser to approve or reject:\n>>> %s\n\n", id, link)
	}
	printQuickstart(e.stderr, "http://"+cfg.Listen.Proxy, cfg.PublicURL, "http://"+cfg.Listen.Admin)
	err = a.serve(ctx, l)
	closeApp(a, log)
	if err != nil {
		return exitFail
	}
	return exitOK
}

// listenOrAny listens on addr, or on a free port of the same host when addr
// is taken, so the quickstart works beside whatever already runs.
func listenOrAny(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	host, _, splitErr := net.SplitHostPort(addr)
	if splitErr != nil {
		return nil, err
	}
	ln, err2 := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err2 != nil {
		return nil, errors.Join(err, err2)
	}
	return ln, nil
}

func randomSecret() string {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func levelOf(s string) slog.Level {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return lv
}

func printQuickstart(w io.Writer, proxyURL, approvalsURL, adminURL string) {
	curl := func(tool, args string) string {
		return fmt.Sprintf("curl -s -i -X POST %s/tools/%s -H 'Content-Type: application/json' -d '%s'", proxyURL, tool, args)
	}
	lines := []string{
		"",
		"toolgate quickstart: toolgate guards the example notes tools (read_file, write_note, delete_file)",
		"with the example policy (rego/example/notes.rego). Nothing reaches the tools without a decision.",
		"",
		"  proxy      " + proxyURL + "      agents call REST tools here",
		"  MCP        " + proxyURL + "/mcp  the same tools over MCP (Streamable HTTP)",
		"  approvals  " + approvalsURL,
		"  admin      " + adminURL + "/metrics   /livez /readyz",
		"",
		"Try it from another terminal:",
		"",
		"  # allow: reading the book is allowed (the tool's own answer comes back)",
		"  " + curl("read_file", `{"path":"README.md"}`),
		"",
		"  # deny (403): .env holds secrets, for every tool",
		"  " + curl("read_file", `{"path":".env"}`),
		"",
		"  # deny (403): nothing is ever deleted",
		"  " + curl("delete_file", `{"path":"notes/today.txt"}`),
		"",
		"  # ask: writing a note needs a human. The call is parked and its approval link is printed",
		"  # below; curl is held up to 25s, then gets 202 and a status URL. Open the link, approve,",
		"  # and curl gets the tool's answer (or run the same command again: it attaches to the call).",
		"  " + curl("write_note", `{"path":"notes/today.txt","content":"hello"}`),
		"  curl -s " + proxyURL + "/_toolgate/calls/CALL_ID        # follow a parked call",
		"",
		"  # invalid (400): duplicate keys could be read two ways, so they are refused",
		"  " + curl("read_file", `{"path":"README.md","path":".env"}`),
		"",
		"Every decision is logged below. Press Ctrl-C to stop.",
		"",
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}
