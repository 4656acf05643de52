package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// The black-box MCP test drives toolgate with third-party MCP software, pinned
// in the repository's package.json / package-lock.json and installed with
// `npm ci` at the repository root: the reference server
// @modelcontextprotocol/server-everything as the upstream and
// @modelcontextprotocol/inspector-cli as the client.

// blackBoxTools locates the installed npm packages: the server's entry point
// and the inspector-cli build directory. Without them (and node) the test is
// skipped, except under CI=true, where CI runs `npm ci` first and the test
// must run.
func blackBoxTools(t *testing.T) (node, serverJS, inspectorDir string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := filepath.Join(root, "node_modules", "@modelcontextprotocol")
	for _, dir := range []string{"server-everything", "inspector-cli"} {
		if _, err := os.Stat(filepath.Join(pkgs, dir)); err != nil {
			testkit.Unavailable(t, "%s is not installed (run `npm ci` at the repository root)", filepath.Join("node_modules", "@modelcontextprotocol", dir))
		}
	}
	node, err = exec.LookPath("node")
	if err != nil {
		testkit.Unavailable(t, "node is not on PATH")
	}
	serverJS = filepath.Join(pkgs, "server-everything", "dist", "index.js")
	inspectorDir = filepath.Join(pkgs, "inspector-cli", "build")
	for _, f := range []string{serverJS, filepath.Join(inspectorDir, "index.js")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the npm packages are installed but incomplete (run `npm ci`): %v", err)
		}
	}
	return node, serverJS, inspectorDir
}

// startEverything runs server-everything with its Streamable HTTP transport on
// a free loopback port and returns that port once it accepts connections. Its
// output is returned for failure reports.
func startEverything(t *testing.T, node, serverJS string) (int, *testkit.Buffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	// The server lives as long as the test, bounded so that it never outlives
	// a hung run.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	out := &testkit.Buffer{}
	// dist/index.js <transport>; the port comes from $PORT (default 3001).
	srv := exec.CommandContext(ctx, node, serverJS, "streamableHttp")
	srv.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	srv.Stdout, srv.Stderr = out, out
	srv.WaitDelay = 5 * time.Second
	if err := srv.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		cancel() // kills the process
		<-exited
	})

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return port, out
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("server-everything exited (%v) before listening on %s:\n%s", err, addr, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s within 20s:\n%s", addr, out.String())
		}
	}
}

// toolResult is the part of a CallToolResult the test looks at.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool           `json:"isError"`
	Meta    map[string]any `json:"_meta"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestBlackBoxMCP(t *testing.T) {
	node, serverJS, inspectorDir := blackBoxTools(t)
	port, serverOut := startEverything(t, node, serverJS)

	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": fmt.Sprintf(`listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
upstreams:
  - {name: everything, url: http://127.0.0.1:%d, protocol: mcp, prefix: /, mcp_path: /mcp}
identity:
  anonymous: true
policy:
  rules_file: ./rules.yaml
pending:
  store: memory
approvals:
  secret: ${TOOLGATE_APPROVALS_SECRET}
shutdown_grace: 2s
`, port),
		// Session plumbing (initialize, notifications, logging/setLevel, the
		// GET stream) is allowed by the shipped library; every other tool of
		// the server falls to the default deny.
		"rules.yaml": `rules:
  - {id: echo, effect: allow, tool: echo, target: "*"}
  - {id: long, effect: allow, tool: trigger-long-running-operation, target: "*"}
  - {id: no-sum, effect: deny, tool: get-sum, target: "*"}
`,
	})
	tg := startServe(t, []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")},
		[]string{"TOOLGATE_APPROVALS_SECRET=" + testSecret})
	endpoint := tg.proxy + "/mcp"

	// inspect runs inspector-cli against toolgate and decodes the result it
	// prints as JSON on stdout into v. inspector-cli resolves ../package.json
	// from its working directory, so it runs in its build directory.
	inspect := func(t *testing.T, v any, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		argv := append([]string{filepath.Join(inspectorDir, "index.js"), endpoint, "--transport", "http"}, args...)
		cmd := exec.CommandContext(ctx, node, argv...)
		cmd.Dir = inspectorDir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		if err == nil {
			err = json.Unmarshal(stdout.Bytes(), v)
		}
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("%w (timed out after 60s)", err)
			}
			t.Fatalf("inspector-cli %s: %v\n--- stdout\n%s\n--- stderr\n%s\n--- toolgate stderr\n%s\n--- server-everything output\n%s",
				strings.Join(args, " "), err, stdout.String(), stderr.String(), tg.stderr.String(), serverOut.String())
		}
		return stdout.String()
	}
	// failf reports a wrong answer with everything needed to tell why.
	failf := func(t *testing.T, out, format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\n--- inspector-cli stdout\n%s\n--- toolgate stderr\n%s\n--- server-everything output\n%s",
			fmt.Sprintf(format, args...), out, tg.stderr.String(), serverOut.String())
	}

	t.Run("tools/list is filtered", func(t *testing.T) {
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		out := inspect(t, &res, "--method", "tools/list")
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		t.Logf("listed tools: %v", names)
		for _, want := range []string{"echo", "trigger-long-running-operation"} {
			if !slices.Contains(names, want) {
				failf(t, out, "tools/list lacks allowed tool %q: %v", want, names)
			}
		}
		if slices.Contains(names, "get-sum") {
			failf(t, out, "tools/list shows get-sum, which a target-* deny rule forbids: %v", names)
		}
	})

	t.Run("allowed call", func(t *testing.T) {
		var res toolResult
		out := inspect(t, &res, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi")
		if res.IsError || res.text() != "Echo: hi" {
			failf(t, out, "echo: isError=%v text=%q, want the echoed %q", res.IsError, res.text(), "Echo: hi")
		}
	})

	t.Run("denied call", func(t *testing.T) {
		var res toolResult
		out := inspect(t, &res, "--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "b=3")
		if !res.IsError || !strings.HasPrefix(res.text(), "Denied by policy") {
			failf(t, out, "get-sum: isError=%v text=%q, want an isError result saying \"Denied by policy: ...\"", res.IsError, res.text())
		}
		if strings.Contains(res.text(), "The sum of") {
			failf(t, out, "get-sum reached the upstream")
		}
		if res.Meta["toolgate/decision"] != "deny" || res.Meta["toolgate/call_id"] == nil {
			failf(t, out, "get-sum: _meta = %v, want toolgate/decision deny and a toolgate/call_id", res.Meta)
		}
	})

	t.Run("long-running call with progress", func(t *testing.T) {
		// The progress token makes the server send notifications/progress on
		// the call's SSE response stream before the result. inspector-cli
		// does not print notifications, so only the result is checked.
		var res toolResult
		out := inspect(t, &res, "--method", "tools/call", "--tool-name", "trigger-long-running-operation",
			"--tool-arg", "duration=1", "steps=3", "--tool-metadata", "progressToken=blackbox-progress")
		want := "Long running operation completed. Duration: 1 seconds, Steps: 3."
		if res.IsError || res.text() != want {
			failf(t, out, "trigger-long-running-operation: isError=%v text=%q, want %q", res.IsError, res.text(), want)
		}
	})
}
