package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// The Tasks black-box test drives toolgate with the published client stack of
// the Tasks extension (io.modelcontextprotocol/tasks) of MCP 2026-07-28:
// @modelcontextprotocol/client negotiates the revision and
// @modelcontextprotocol/ext-tasks follows the task, in
// testdata/tasks-client.mjs. server-everything (the other black-box test's
// upstream) speaks only the 2025 revisions, so the upstream is
// testdata/tasks-upstream.mjs, built on the reference server SDK
// @modelcontextprotocol/server. All three are pinned in the repository's
// package.json / package-lock.json and installed with `npm ci`.

// tasksWait bounds each step the test waits for; toolgate suggests polling
// every few seconds, so a step takes one or two polls.
const tasksWait = 60 * time.Second

// blackBoxTasksTools locates node and the test's scripts, and checks that
// the npm packages they import are installed. Without them the test is
// skipped, except under CI=true, where CI runs `npm ci` first and the test
// must run.
func blackBoxTasksTools(t *testing.T) (node, upstreamJS, clientJS string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"client", "ext-tasks", "server"} {
		dir := filepath.Join("node_modules", "@modelcontextprotocol", pkg)
		if _, err := os.Stat(filepath.Join(root, dir, "package.json")); err != nil {
			testkit.Unavailable(t, "%s is not installed (run `npm ci` at the repository root)", dir)
		}
	}
	node, err = exec.LookPath("node")
	if err != nil {
		testkit.Unavailable(t, "node is not on PATH")
	}
	upstreamJS, err = filepath.Abs(filepath.Join("testdata", "tasks-upstream.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	clientJS, err = filepath.Abs(filepath.Join("testdata", "tasks-client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return node, upstreamJS, clientJS
}

// jsonLines runs a node script and hands each JSON line it prints on stdout
// to the test, in order.
type jsonLines struct {
	name   string
	lines  chan map[string]any
	stdout *testkit.Buffer
	stderr *testkit.Buffer
	exited chan error // receives the process's exit once, after its last line
}

// startNode starts a node script that lives as long as the test (bounded, so
// that a hung one never outlives it).
func startNode(t *testing.T, name, node string, args ...string) *jsonLines {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	p := &jsonLines{name: name, lines: make(chan map[string]any, 1024), stdout: &testkit.Buffer{}, stderr: &testkit.Buffer{}, exited: make(chan error, 1)}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			_, _ = p.stdout.Write(append(sc.Bytes(), '\n'))
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				p.lines <- line
			}
		}
		close(p.lines)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel() // kills the process if it still runs
		<-p.exited
	})
	return p
}

// next returns the next line whose "event" is one of events, skipping the
// others; report adds the surroundings to a failure.
func (p *jsonLines) next(t *testing.T, report func() string, events ...string) map[string]any {
	t.Helper()
	timeout := time.After(tasksWait)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s ended without printing %v\n%s", p.name, events, report())
			}
			ev, _ := line["event"].(string)
			if slices.Contains(events, ev) {
				return line
			}
		case <-timeout:
			t.Fatalf("%s printed none of %v within %v\n%s", p.name, events, tasksWait, report())
		}
	}
}

// startTasksUpstream runs the 2026-07-28 upstream and returns its port.
func startTasksUpstream(t *testing.T, node, upstreamJS string) (int, *jsonLines) {
	t.Helper()
	up := startNode(t, "the upstream", node, upstreamJS)
	line := up.next(t, func() string { return "--- upstream stderr\n" + up.stderr.String() }, "listening")
	port, ok := line["port"].(float64)
	if !ok || port <= 0 {
		t.Fatalf("the upstream printed %v, want a port", line)
	}
	return int(port), up
}

// executions counts the upstream's executions of tool with message.
func executions(up *jsonLines, tool, message string) int {
	n := 0
	for line := range strings.SplitSeq(up.stdout.String(), "\n") {
		var ev struct {
			Event, Tool, Message string
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "executed" && ev.Tool == tool && ev.Message == message {
			n++
		}
	}
	return n
}

// wireAnswer is a JSON-RPC answer as tasks-client.mjs printed it.
type wireAnswer struct {
	Result map[string]any `json:"result"`
	Error  map[string]any `json:"error"`
}

// wire decodes a {"event":"wire"} line: the method, and the answer the
// server sent (nil when the exchange itself failed).
func wire(t *testing.T, line map[string]any) (string, *wireAnswer) {
	t.Helper()
	method, _ := line["method"].(string)
	raw, has := line["response"]
	if !has {
		return method, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var a wireAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("wire answer %s: %v", b, err)
	}
	return method, &a
}

// asJSON is v as JSON, for failure messages.
func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func TestBlackBoxTasks(t *testing.T) {
	node, upstreamJS, clientJS := blackBoxTasksTools(t)
	port, up := startTasksUpstream(t, node, upstreamJS)

	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": fmt.Sprintf(`listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
upstreams:
  - {name: tasks, url: http://127.0.0.1:%d, protocol: mcp, prefix: /, mcp_path: /mcp}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  rules_file: ./rules.yaml
pending:
  store: memory
  hold: 1s
approvals:
  secret: %s
  approvers: [{name: alice, key: alice-key-0123456789}]
shutdown_grace: 2s
`, port, testSecret),
		// Protocol plumbing (server/discover, tasks/*) is allowed by the
		// shipped library. echo always asks; publish asks its caller's own
		// human (the requester may confirm it).
		"rules.yaml": `rules:
  - {id: echo-ask, effect: ask, tool: echo, target: "*"}
  - {id: publish-ask, effect: ask, tool: publish, target: "*", approvers: {requester: true}}
`,
	})
	tg := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	endpoint := tg.proxy + "/mcp"

	// start starts the client for one call of tool with message, checks the
	// negotiation and the task's creation, and returns the client and the
	// task's ID once a tasks/get has shown the undecided task as waiting
	// (working, or input_required when the client declares URL elicitation
	// and the call's requester may confirm it).
	type run struct {
		client *jsonLines
		taskID string
		report func() string
	}
	start := func(t *testing.T, tool, message, waiting string, extra ...string) run {
		t.Helper()
		args := append([]string{clientJS, "--bearer=agent-key-0123456789"}, extra...)
		args = append(args, endpoint, tool, fmt.Sprintf(`{"message":%q}`, message))
		c := startNode(t, "tasks-client.mjs", node, args...)
		r := run{client: c}
		r.report = func() string {
			return "--- tasks-client.mjs stdout\n" + c.stdout.String() + "--- tasks-client.mjs stderr\n" + c.stderr.String() +
				"--- toolgate stderr\n" + tg.stderr.String() + "--- upstream stdout\n" + up.stdout.String() + "--- upstream stderr\n" + up.stderr.String()
		}
		failIfError := func(line map[string]any) {
			t.Helper()
			if line["event"] == "error" {
				t.Fatalf("tasks-client.mjs failed: %v\n%s", line["message"], r.report())
			}
		}

		line := c.next(t, r.report, "connected", "error")
		failIfError(line)
		if line["era"] != "modern" {
			t.Fatalf("the client negotiated era %v through toolgate, want modern (2026-07-28)\n%s", line["era"], r.report())
		}
		line = c.next(t, r.report, "session", "error")
		failIfError(line)
		if line["generation"] != "v2" {
			t.Fatalf("ext-tasks chose Tasks generation %v, want v2: the server/discover answer through toolgate must offer "+
				`capabilities.extensions["io.modelcontextprotocol/tasks"] = {} (it offered %s)`+"\n%s",
				line["generation"], asJSON(c.lastCapabilities()), r.report())
		}

		// The tools/call answer, as it came over the wire: a flat
		// CreateTaskResult whose taskId is toolgate's call ID.
		line = c.next(t, r.report, "wire", "created", "error")
		failIfError(line)
		method, answer := wire(t, line)
		if line["event"] != "wire" || method != "tools/call" || answer == nil || answer.Result == nil {
			t.Fatalf("want the tools/call answer, got %s\n%s", asJSON(line), r.report())
		}
		created := answer.Result
		if created["resultType"] != "task" || created["status"] != "working" {
			t.Fatalf("tools/call of an asked call declaring the Tasks extension answered %s, want a CreateTaskResult "+
				`("resultType":"task","status":"working")`+"\n%s", asJSON(created), r.report())
		}
		for _, field := range []string{"taskId", "createdAt", "lastUpdatedAt", "ttlMs"} {
			if _, has := created[field]; !has {
				t.Errorf("CreateTaskResult %s lacks %q", asJSON(created), field)
			}
		}
		r.taskID, _ = created["taskId"].(string)
		if st := callStatus(t, tg.proxy, r.taskID, "agent-key-0123456789"); st["call_id"] != r.taskID || st["status"] != "waiting" || st["tool"] != tool {
			t.Fatalf("GET /_toolgate/calls/%s: %s, want the waiting %s call whose ID is the taskId\n%s", r.taskID, asJSON(st), tool, r.report())
		}

		line = c.next(t, r.report, "created", "error")
		failIfError(line)
		if line["kind"] != "task" || line["taskId"] != r.taskID {
			t.Fatalf("ext-tasks made %s of the CreateTaskResult, want a task execution of %s\n%s", asJSON(line), r.taskID, r.report())
		}

		// Polled while nobody has decided.
		for {
			line = c.next(t, r.report, "wire", "outcome", "error")
			failIfError(line)
			method, answer = wire(t, line)
			if line["event"] != "wire" || answer == nil {
				t.Fatalf("want tasks/get answers while the call waits, got %s\n%s", asJSON(line), r.report())
			}
			if method != "tasks/get" {
				continue
			}
			got := answer.Result
			if answer.Error != nil || got["resultType"] != "complete" || got["taskId"] != r.taskID || got["status"] != waiting {
				t.Fatalf("tasks/get of a waiting call answered %s, want "+`{"resultType":"complete","taskId":%q,"status":%q,...}`+"\n%s",
					asJSON(answer), r.taskID, waiting, r.report())
			}
			return r
		}
	}

	// finish reads the rest of the client's lines until it exits: its
	// outcome, and the last tasks/get answer it got (the one that ended the
	// task, or with --cancel the read after the cancel).
	finish := func(t *testing.T, r run) (outcome map[string]any, final *wireAnswer) {
		t.Helper()
		timeout := time.After(tasksWait)
		for done := false; !done; {
			select {
			case line, ok := <-r.client.lines:
				switch {
				case !ok:
					done = true
				case line["event"] == "error":
					t.Fatalf("tasks-client.mjs failed: %v\n%s", line["message"], r.report())
				case line["event"] == "outcome":
					outcome = line
				case line["event"] == "wire":
					if method, answer := wire(t, line); method == "tasks/get" && answer != nil {
						final = answer
					}
				}
			case <-timeout:
				t.Fatalf("tasks-client.mjs did not finish within %v\n%s", tasksWait, r.report())
			}
		}
		if err := <-r.client.exited; err != nil {
			r.client.exited <- err
			t.Fatalf("tasks-client.mjs: %v\n%s", err, r.report())
		}
		r.client.exited <- nil
		if outcome == nil {
			t.Fatalf("tasks-client.mjs printed no outcome\n%s", r.report())
		}
		// The exchange as the client saw it, for -v.
		t.Logf("tasks-client.mjs printed:\n%s", r.client.stdout.String())
		return outcome, final
	}

	// resultOf decodes the CallToolResult of a completed task.
	resultOf := func(t *testing.T, r run, v any) toolResult {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var res toolResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("result %s: %v\n%s", b, err, r.report())
		}
		return res
	}

	// Each case's message is its own, so that the upstream's executions
	// are counted per case.
	approved := "approved " + rand.Text()[:8]
	rejected := "rejected " + rand.Text()[:8]
	cancelled := "cancelled " + rand.Text()[:8]
	confirmed := "confirmed " + rand.Text()[:8]

	t.Run("approved call completes with the upstream's result", func(t *testing.T) {
		r := start(t, "echo", approved, "working")
		if code, body := apiRequest(t, "POST", tg.approvals+"/api/approvals/"+r.taskID, "alice-key-0123456789", `{"decision":"approve"}`); code != http.StatusOK {
			t.Fatalf("approve %s: %d %s", r.taskID, code, body)
		}
		outcome, final := finish(t, r)

		want := "Echo: " + approved
		if final == nil || final.Result["status"] != "completed" || final.Result["taskId"] != r.taskID {
			t.Fatalf("the last tasks/get answered %s, want the task completed\n%s", asJSON(final), r.report())
		}
		if res := resultOf(t, r, final.Result["result"]); res.IsError || res.text() != want {
			t.Fatalf("the completed task's result is %s, want the upstream's %q\n%s", asJSON(final.Result["result"]), want, r.report())
		}
		if outcome["status"] != "completed" {
			t.Fatalf("ext-tasks settled the call as %s, want completed\n%s", asJSON(outcome), r.report())
		}
		if res := resultOf(t, r, outcome["result"]); res.IsError || res.text() != want {
			t.Fatalf("ext-tasks handed the application %s, want the upstream's %q\n%s", asJSON(outcome["result"]), want, r.report())
		}
		if st := callStatus(t, tg.proxy, r.taskID, "agent-key-0123456789"); st["status"] != "executed" {
			t.Fatalf("GET /_toolgate/calls/%s: %s, want executed\n%s", r.taskID, asJSON(st), r.report())
		}
		if n := executions(up, "echo", approved); n != 1 {
			t.Fatalf("the upstream ran the approved call %d times, want once\n%s", n, r.report())
		}
	})

	t.Run("rejected call completes with isError and the comment", func(t *testing.T) {
		r := start(t, "echo", rejected, "working")
		comment := "not today " + rand.Text()[:8]
		if code, body := apiRequest(t, "POST", tg.approvals+"/api/approvals/"+r.taskID, "alice-key-0123456789",
			fmt.Sprintf(`{"decision":"reject","comment":%q}`, comment)); code != http.StatusOK {
			t.Fatalf("reject %s: %d %s", r.taskID, code, body)
		}
		outcome, final := finish(t, r)

		if final == nil || final.Result["status"] != "completed" || final.Result["taskId"] != r.taskID {
			t.Fatalf("the last tasks/get answered %s, want the task completed (with an isError result)\n%s", asJSON(final), r.report())
		}
		if res := resultOf(t, r, final.Result["result"]); !res.IsError || !strings.Contains(res.text(), comment) {
			t.Fatalf("the rejected task's result is %s, want isError with the comment %q\n%s", asJSON(final.Result["result"]), comment, r.report())
		}
		if outcome["status"] != "completed" {
			t.Fatalf("ext-tasks settled the call as %s, want completed\n%s", asJSON(outcome), r.report())
		}
		if res := resultOf(t, r, outcome["result"]); !res.IsError || !strings.Contains(res.text(), comment) {
			t.Fatalf("ext-tasks handed the application %s, want isError with the comment %q\n%s", asJSON(outcome["result"]), comment, r.report())
		}
		if st := callStatus(t, tg.proxy, r.taskID, "agent-key-0123456789"); st["status"] != "rejected" {
			t.Fatalf("GET /_toolgate/calls/%s: %s, want rejected\n%s", r.taskID, asJSON(st), r.report())
		}
	})

	t.Run("cancelled call", func(t *testing.T) {
		r := start(t, "echo", cancelled, "working", "--cancel")
		var ack *wireAnswer
		for ack == nil {
			line := r.client.next(t, r.report, "wire", "outcome", "error")
			if line["event"] != "wire" {
				t.Fatalf("want the tasks/cancel answer, got %s\n%s", asJSON(line), r.report())
			}
			if method, answer := wire(t, line); method == "tasks/cancel" {
				if answer == nil || answer.Error != nil || answer.Result["resultType"] != "complete" {
					t.Fatalf("tasks/cancel of a waiting call answered %s, want "+`{"resultType":"complete"}`+"\n%s", asJSON(answer), r.report())
				}
				ack = answer
			}
		}
		outcome, final := finish(t, r)
		if outcome["status"] != "cancelled" {
			t.Fatalf("ext-tasks settled the call as %s, want cancelled\n%s", asJSON(outcome), r.report())
		}
		// The client reads the task once more after the acknowledgement.
		if final == nil || final.Result["status"] != "cancelled" || final.Result["taskId"] != r.taskID {
			t.Fatalf("tasks/get after tasks/cancel answered %s, want the task cancelled\n%s", asJSON(final), r.report())
		}
		if st := callStatus(t, tg.proxy, r.taskID, "agent-key-0123456789"); st["status"] != "cancelled" {
			t.Fatalf("GET /_toolgate/calls/%s: %s, want cancelled\n%s", r.taskID, asJSON(st), r.report())
		}
	})

	t.Run("requester confirms on the page the task's input request links to", func(t *testing.T) {
		r := start(t, "publish", confirmed, "input_required", "--elicit-url")
		line := r.client.next(t, r.report, "input-request", "outcome", "error")
		var req struct {
			Request struct {
				Kind   string `json:"kind"`
				Params struct {
					Mode string `json:"mode"`
					URL  string `json:"url"`
				} `json:"params"`
			} `json:"request"`
			InputID string `json:"inputId"`
		}
		if err := json.Unmarshal([]byte(asJSON(line)), &req); err != nil || line["event"] != "input-request" ||
			req.Request.Kind != "elicitation" || req.Request.Params.Mode != "url" || !strings.Contains(req.Request.Params.URL, "/confirm/"+r.taskID+"?") {
			t.Fatalf("ext-tasks handed the host %s, want a URL elicitation of the call's confirmation page (%v)\n%s", asJSON(line), err, r.report())
		}
		// What the host's human does with the URL: confirm on the page.
		page, token := relink(t, req.Request.Params.URL, tg.approvals)
		if code, body := postForm(t, page, url.Values{"token": {token}, "decision": {"approve"}}, nil); code != http.StatusOK {
			t.Fatalf("confirm %s: %d %s", r.taskID, code, body)
		}
		outcome, final := finish(t, r)

		want := "Published: " + confirmed
		var ack bool
		for l := range strings.SplitSeq(r.client.stdout.String(), "\n") {
			var ev map[string]any
			if json.Unmarshal([]byte(l), &ev) == nil && ev["event"] == "wire" {
				if method, answer := wire(t, ev); method == "tasks/update" {
					if answer == nil || answer.Error != nil || answer.Result["resultType"] != "complete" {
						t.Fatalf("tasks/update with the host's answer answered %s, want "+`{"resultType":"complete"}`+"\n%s", asJSON(answer), r.report())
					}
					ack = true
				}
			}
		}
		if !ack {
			t.Fatalf("ext-tasks sent no tasks/update with the host's answer\n%s", r.report())
		}
		if final == nil || final.Result["status"] != "completed" {
			t.Fatalf("the last tasks/get answered %s, want the task completed\n%s", asJSON(final), r.report())
		}
		if res := resultOf(t, r, outcome["result"]); outcome["status"] != "completed" || res.IsError || res.text() != want {
			t.Fatalf("ext-tasks settled the call as %s, want completed with the upstream's %q\n%s", asJSON(outcome), want, r.report())
		}
		if st := callStatus(t, tg.proxy, r.taskID, "agent-key-0123456789"); st["status"] != "executed" || st["decided_by"] != "requester:agent-42" {
			t.Fatalf("GET /_toolgate/calls/%s: %s, want executed, decided by requester:agent-42\n%s", r.taskID, asJSON(st), r.report())
		}
	})

	// By now the sweeper's grace for the approved calls has long passed, so
	// a second execution would have happened.
	if t.Failed() {
		return
	}
	for _, c := range []struct {
		tool, message string
		want          int
	}{{"echo", approved, 1}, {"echo", rejected, 0}, {"echo", cancelled, 0}, {"publish", confirmed, 1}} {
		if n := executions(up, c.tool, c.message); n != c.want {
			t.Errorf("the upstream ran %s %q %d times, want %d\n--- upstream stdout\n%s", c.tool, c.message, n, c.want, up.stdout.String())
		}
	}
}

// lastCapabilities is the server capabilities the client printed when it
// connected, for failure messages.
func (p *jsonLines) lastCapabilities() any {
	for line := range strings.SplitSeq(p.stdout.String(), "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["event"] == "connected" {
			return ev["serverCapabilities"]
		}
	}
	return nil
}
