package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

const testSecret = "0123456789abcdef0123456789abcdef-test"

// writeFiles writes files under dir and returns dir.
func writeFiles(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testConfig(upstream string) string {
	return `listen:
  proxy: 127.0.0.1:0
  approvals: 127.0.0.1:0
  admin: 127.0.0.1:0
upstreams:
  - name: files
    url: ` + upstream + `
identity:
  api_keys:
    - {key: "${AGENT_KEY}", subject: agent-42, groups: [agents]}
policy:
  dir: ./policy
  rules_file: ./rules.yaml
approvals:
  secret: ${TOOLGATE_APPROVALS_SECRET}
limits:
  max_body_bytes: 4KiB
shutdown_grace: 2s
`
}

type running struct {
	stderr *testkit.Buffer
	done   chan int
	cancel context.CancelFunc
	proxy  string
	admin  string
}

// startServe runs `toolgate serve` in-process and waits until it listens.
func startServe(t testing.TB, args []string, environ []string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{stderr: &testkit.Buffer{}, done: make(chan int, 1), cancel: cancel}
	go func() { r.done <- run(ctx, args, environ, io.Discard, r.stderr) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(r.stderr.String()))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "toolgate listening" {
				r.proxy, r.admin = "http://"+rec["proxy"].(string), "http://"+rec["admin"].(string)
				t.Cleanup(func() { cancel(); <-r.done })
				return r
			}
		}
		select {
		case code := <-r.done:
			t.Fatalf("serve exited %d before listening:\n%s", code, r.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("serve did not listen:\n%s", r.stderr.String())
	return nil
}

func doPost(t *testing.T, url, body, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("X-Toolgate-Decision") + " " + string(b)
}

// TestServe runs the binary's serve command against a real config, policy
// directory and recording upstream, then shuts it down like SIGTERM would.
func TestServe(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml":      testConfig(up.URL),
		"rules.yaml":         "rules:\n  - {id: r1, effect: allow, tool: Read, target: \"*\"}\n  - {id: r2, effect: deny, tool: Read, target: secrets.txt}\n",
		"policy/p.rego":      "package toolgate\n\ndeny contains {\"id\": \"nope\", \"message\": \"no deleting\"} if input.tool.name == \"Delete\"\n",
		"policy/p_test.rego": "package toolgate_test\n\ntest_x if true\n",
	})
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	r := startServe(t, []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")}, environ)

	if code, body := doPost(t, r.proxy+"/tools/Read", `{"path":"a.txt"}`, "agent-key-1-0123456789"); code != 200 || !strings.HasPrefix(body, "allow ") {
		t.Fatalf("allowed call: %d %s", code, body)
	}
	if code, body := doPost(t, r.proxy+"/tools/Read", `{"path":"secrets.txt"}`, "agent-key-1-0123456789"); code != 403 || !strings.Contains(body, `"rule_ids":["r2"]`) {
		t.Fatalf("denied call: %d %s", code, body)
	}
	if code, body := doPost(t, r.proxy+"/tools/Delete", `{"path":"a"}`, "agent-key-1-0123456789"); code != 403 || !strings.Contains(body, "no deleting") {
		t.Fatalf("user policy: %d %s", code, body)
	}
	if code, _ := doPost(t, r.proxy+"/tools/Read", `{"path":"a.txt"}`, ""); code != 401 {
		t.Fatalf("no credentials: %d, want 401 (anonymous is off)", code)
	}
	var seen []string
	for _, req := range up.Requests() {
		seen = append(seen, req.Path+" "+string(req.Body))
	}
	if len(seen) != 1 || seen[0] != `/tools/Read {"path":"a.txt"}` {
		t.Fatalf("upstream saw %q", seen)
	}

	// Hot reload of the rules file: r1 now denies.
	writeFiles(t, dir, map[string]string{"rules.yaml": "rules:\n  - {id: r1, effect: deny, tool: Read, target: \"*\"}\n"})
	deadline := time.Now().Add(3 * time.Second)
	for {
		code, _ := doPost(t, r.proxy+"/tools/Read", `{"path":"a.txt"}`, "agent-key-1-0123456789")
		if code == 403 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rules file change not picked up within 3s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	res, err := http.Get(r.admin + "/readyz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", res, err)
	}
	res.Body.Close()
	for _, probe := range []string{"/readyz", "/livez"} {
		if res, err := http.Head(r.admin + probe); err != nil || res.StatusCode != 200 {
			t.Fatalf("HEAD %s: %v %v", probe, res, err)
		}
	}
	res, err = http.Get(r.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`toolgate_decisions_total{action="allow",kind="rest",upstream="files"}`,
		`toolgate_decisions_total{action="deny",kind="rest",upstream="files"}`,
		`toolgate_decision_duration_seconds_count`,
		`toolgate_policy_reloads_total{result="success"}`,
		`toolgate_requests_refused_total{outcome="unauthenticated"} 1`,
		`toolgate_build_info{`,
		`toolgate_notifications_total{format="cloudevents",result="delivered"} 0`, // no notify configured
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Decision-log events: one per decided call, no arguments.
	logs := r.stderr.String()
	if n := strings.Count(logs, `"path":"toolgate/decision"`); n < 4 {
		t.Errorf("%d decision events, want one per decided call", n)
	}
	if strings.Contains(logs, `"path":"a.txt"`) || strings.Contains(logs, "agent-key-1-0123456789") {
		t.Error("the log holds arguments or a credential")
	}

	r.cancel()
	select {
	case code := <-r.done:
		if code != 0 {
			t.Fatalf("serve exited %d after shutdown", code)
		}
		r.done <- code
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestRunRefusesBadStarts(t *testing.T) {
	base := map[string]string{
		"rules.yaml":    "rules: []\n",
		"policy/p.rego": "package toolgate\n",
	}
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	cases := []struct {
		name    string
		files   map[string]string
		environ []string
		args    []string
		want    string
	}{
		{"unknown key", map[string]string{"toolgate.yaml": testConfig("http://127.0.0.1:1") + "pending:\n  redis_ur: x\n"}, environ, nil, "pending.redis_ur"},
		{"no secret", map[string]string{"toolgate.yaml": testConfig("http://127.0.0.1:1")}, []string{"AGENT_KEY=agent-key-1-0123456789"}, nil, "TOOLGATE_APPROVALS_SECRET"},
		{"short secret", map[string]string{"toolgate.yaml": testConfig("http://127.0.0.1:1")}, []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=short"}, nil, "approvals.secret"},
		{"broken policy", map[string]string{"toolgate.yaml": testConfig("http://127.0.0.1:1"), "policy/p.rego": "package toolgate\nallow if {"}, environ, nil, "p.rego"},
		{"bad rules", map[string]string{"toolgate.yaml": testConfig("http://127.0.0.1:1"), "rules.yaml": "rules: [{id: a, effect: maybe, tool: x, target: y}]"}, environ, nil, "effect"},
		{"bad flag value", map[string]string{"toolgate.yaml": testConfig("http://127.0.0.1:1")}, environ, []string{"--policy-mode", "yolo"}, "policy.mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, t.TempDir(), base)
			writeFiles(t, dir, tc.files)
			var stderr bytes.Buffer
			args := append([]string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")}, tc.args...)
			code := run(t.Context(), args, tc.environ, io.Discard, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 naming %q", code, stderr.String(), tc.want)
			}
			if strings.Contains(stderr.String(), testSecret) {
				t.Error("the secret was printed")
			}
		})
	}
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"nonsense"}, nil, io.Discard, &stderr); code != exitUsage {
		t.Errorf("unknown command: exit %d", code)
	}
	if code := run(t.Context(), []string{"serve"}, nil, io.Discard, &stderr); code != exitUsage {
		t.Errorf("serve without config: exit %d", code)
	}
	// An argument a command does not take is bad usage, not ignored.
	for _, args := range [][]string{{"version", "--bogus"}, {"healthcheck", "extra"}, {"serve", "--config", "x.yaml", "extra"}} {
		stderr.Reset()
		if code := run(t.Context(), args, nil, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "unexpected argument") {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, code, stderr.String())
		}
	}
	// Asking a command for help is not bad usage: its usage on stdout, exit 0.
	for _, args := range [][]string{{"--help"}, {"help"}, {"policy", "--help"}, {"policy", "-h"}, {"version", "--help"}, {"config", "-h"}, {"serve", "-h"}} {
		var stdout bytes.Buffer
		if code := run(t.Context(), args, nil, &stdout, io.Discard); code != exitOK || !strings.Contains(strings.ToLower(stdout.String()), "usage") {
			t.Errorf("%v: exit %d, stdout %q; want 0 and the usage", args, code, stdout.String())
		}
	}
}

func TestConfigValidateAndPolicyEval(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": testConfig("http://127.0.0.1:1"),
		"rules.yaml":    "rules:\n  - {id: w, effect: ask, tool: Write, target: \"notes/*\"}\n",
		"policy/p.rego": "package toolgate\n",
		"input.json":    `{"kind":"rest","phase":"call","mode":"default","tool":{"name":"Write","arguments":{"path":"notes/a"},"target":"notes/a"}}`,
		"input2.json":   `{"kind":"rest","mode":"dont_ask","tool":{"name":"Write","arguments":{"path":"notes/a"},"target":"notes/a"}}`,
		// No mode: the configured one (TOOLGATE_POLICY_MODE below in one run).
		"input3.json": `{"kind":"rest","tool":{"name":"Write","arguments":{"path":"notes/a"},"target":"notes/a"}}`,
		// As a decision-log event's input is without log.arguments.
		"logged.json": `{"kind":"rest","phase":"call","tool":{"name":"Write","target":"notes/a"}}`,
		"listed.json": `{"kind":"mcp","phase":"list","tool":{"name":"Write"}}`,
	})
	environ := []string{"AGENT_KEY=agent-secret-key", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	cfgFile := filepath.Join(dir, "toolgate.yaml")

	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"config", "validate", "--config", cfgFile}, environ, &out, &errb); code != 0 {
		t.Fatalf("validate: exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), testSecret) || strings.Contains(out.String(), "agent-secret-key") || !strings.Contains(out.String(), "[redacted]") {
		t.Errorf("validate printed secrets or no redaction:\n%s", out.String())
	}
	for _, c := range []struct{ input, mode, want string }{
		{"input.json", "", `"action": "ask"`},
		{"input2.json", "", `"action": "deny"`},
		{"input3.json", "", `"action": "ask"`},
		{"input3.json", "dont_ask", `"action": "deny"`},
		{"input.json", "dont_ask", `"action": "ask"`}, // the document's own mode stands
	} {
		out.Reset()
		env := environ
		if c.mode != "" {
			env = append(slices.Clone(environ), "TOOLGATE_POLICY_MODE="+c.mode)
		}
		code := run(t.Context(), []string{"policy", "eval", "--config", cfgFile, "--input", filepath.Join(dir, c.input)}, env, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), c.want) || !strings.Contains(out.String(), `"w"`) {
			t.Errorf("policy eval %s, mode %q: exit %d\n%s", c.input, c.mode, code, out.String())
		}
	}
	// A call's input without its arguments is decided, with a warning
	// that it may not be decided as the call was; none for the others.
	for input, warned := range map[string]bool{"logged.json": true, "listed.json": false, "input.json": false} {
		errb.Reset()
		code := run(t.Context(), []string{"policy", "eval", "--config", cfgFile, "--input", filepath.Join(dir, input)}, environ, io.Discard, &errb)
		if code != 0 || strings.Contains(errb.String(), "warning: the input's tool has no arguments") != warned {
			t.Errorf("policy eval %s: exit %d, stderr %q; want a warning: %v", input, code, errb.String(), warned)
		}
	}
}

// TestPolicyEvalWithoutSecrets: policy eval reads the production file
// without its secrets (a security team's CI has none), where config
// validate and serve still refuse it; a value that is not a secret is
// still needed.
func TestPolicyEvalWithoutSecrets(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `upstreams: [{name: notes, url: "${NOTES_URL}"}]
identity:
  api_keys: [{key: "${AGENT_KEY}", subject: agent}, {key: "${BATCH_KEY}", subject: batch}]
policy: {rules_file: ./rules.yaml, subject_modes: {batch: dont_ask}}
pending: {store: redis, redis_url: "${REDIS_URL}"}
approvals:
  approvers: [{name: alice, key: "${ALICE_KEY}"}]
  notify: [{url: "${SLACK_WEBHOOK_URL}", format: slack}]
`,
		"rules.yaml": "rules:\n  - {id: w, effect: ask, tool: write_note, target: \"notes/**\"}\n",
		"batch.json": `{"kind":"rest","subject":{"id":"batch"},"tool":{"name":"write_note","arguments":{"path":"notes/a"},"target":"notes/a"}}`,
	})
	cfgFile, input := filepath.Join(dir, "toolgate.yaml"), filepath.Join(dir, "batch.json")
	environ := []string{"NOTES_URL=http://127.0.0.1:1"}
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"policy", "eval", "--config", cfgFile, "--input", input}, environ, &out, &errb); code != 0 {
		t.Fatalf("policy eval without secrets: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `"action": "deny"`) || strings.Contains(out.String(), "stand-in") {
		t.Errorf("policy eval: want batch's dont_ask deny, no stand-in shown:\n%s", out.String())
	}
	for _, args := range [][]string{{"config", "validate", "--config", cfgFile}, {"serve", "--config", cfgFile}} {
		errb.Reset()
		if code := run(t.Context(), args, environ, io.Discard, &errb); code != exitUsage || !strings.Contains(errb.String(), "AGENT_KEY is not set") ||
			!strings.Contains(errb.String(), "REDIS_URL is not set") {
			t.Errorf("%v without secrets: exit %d, want 2 naming them: %s", args, code, errb.String())
		}
	}
	errb.Reset()
	if code := run(t.Context(), []string{"policy", "eval", "--config", cfgFile, "--input", input}, nil, io.Discard, &errb); code != exitUsage || !strings.Contains(errb.String(), "NOTES_URL is not set") {
		t.Errorf("policy eval without a value that is no secret: exit %d: %s", code, errb.String())
	}
}

func TestPolicyTestCommand(t *testing.T) {
	var out bytes.Buffer
	if code := run(t.Context(), []string{"policy", "test", "-v", "../../rego/example"}, nil, &out, &out); code != 0 {
		t.Fatalf("shipped example tests: exit %d\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "PASS") {
		t.Errorf("no report:\n%s", out.String())
	}
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"p.rego":      "package toolgate\nallow if input.tool.name == \"Read\"\n",
		"p_test.rego": "package toolgate_test\nimport data.toolgate\ntest_read if toolgate.allow with input as {\"tool\": {\"name\": \"Write\"}}\n",
	})
	out.Reset()
	if code := run(t.Context(), []string{"policy", "test", dir}, nil, &out, &out); code != exitFail || !strings.Contains(out.String(), "FAIL") {
		t.Fatalf("failing test: exit %d\n%s", code, out.String())
	}
	// As opa test takes them: flags after the path, and a file for a path.
	out.Reset()
	if code := run(t.Context(), []string{"policy", "test", "../../rego/example", "-v", "-run", "test_"}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "PASS") {
		t.Fatalf("flags after the path: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"policy", "test", "../../rego/example", "-v", "-r", "test_no_such_test"}, nil, &out, &out); code != exitFail || !strings.Contains(out.String(), "no tests found") {
		t.Fatalf("-r, as opa test takes it, filtering every test out: exit %d\n%s", code, out.String())
	}
	file := writeFiles(t, t.TempDir(), map[string]string{"only_test.rego": "package x_test\ntest_one if true\n"})
	out.Reset()
	if code := run(t.Context(), []string{"policy", "test", filepath.Join(file, "only_test.rego")}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "PASS: 1/1") {
		t.Fatalf("a file: exit %d\n%s", code, out.String())
	}
}

// TestPolicyTestRulesFile: policy test -rules serves a rules table to the
// tests as serve serves policy.rules_file, so a test can decide a call
// against the configured table; a tree's table beside it is refused, as
// serve refuses one.
func TestPolicyTestRulesFile(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"rules.yaml": "rules:\n  - {id: all, effect: allow, tool: read_file, target: \"*\"}\n  - {id: env, effect: deny, tool: read_file, target: \"**/.env\"}\n",
		"p/p.rego":   "package toolgate\n",
		"p/p_test.rego": "package toolgate_test\n\nimport data.toolgate.lib\n\n" +
			"test_env_denied if {\n\t{r.id | some r in lib.deny} == {\"env\"} with input as {\"kind\": \"rest\", \"tool\": {\"name\": \"read_file\", \"target\": \"a/.env\", \"arguments\": {}}}\n}\n",
		"q/toolgate/data.json": `{"rules": []}`,
	})
	var out bytes.Buffer
	if code := run(t.Context(), []string{"policy", "test", filepath.Join(dir, "p"), "-rules", filepath.Join(dir, "rules.yaml")}, nil, &out, &out); code != exitOK || !strings.Contains(out.String(), "PASS: 1/1") {
		t.Fatalf("policy test -rules: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"policy", "test", filepath.Join(dir, "p")}, nil, &out, &out); code != exitFail {
		t.Fatalf("policy test without -rules: exit %d, want the test failing (no table)\n%s", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"policy", "test", filepath.Join(dir, "p"), filepath.Join(dir, "q"), "-rules", filepath.Join(dir, "rules.yaml")}, nil, &out, &out); code != exitUsage || !strings.Contains(out.String(), "defined both") {
		t.Fatalf("a tree's table beside -rules: exit %d\n%s", code, out.String())
	}
}

// TestPolicyTestShippedTree: the repository's rego/ and rego/lib hold a
// copy of the library policy test loads anyway; the copy is read as the
// same module, and its tests run against it. A copy that differs does not
// load (as serve would not load it).
func TestPolicyTestShippedTree(t *testing.T) {
	for _, dir := range []string{"../../rego", "../../rego/lib"} {
		var out bytes.Buffer
		if code := run(t.Context(), []string{"policy", "test", dir}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "PASS") {
			t.Errorf("policy test %s: exit %d\n%s", dir, code, out.String())
		}
	}
	lib, err := os.ReadFile("../../rego/lib/toolgate.rego")
	if err != nil {
		t.Fatal(err)
	}
	other := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.rego":      string(lib) + "\nextra := 1\n",
		"toolgate_test.rego": "package toolgate.lib_test\ntest_one if true\n",
	})
	var out bytes.Buffer
	if code := run(t.Context(), []string{"policy", "test", other}, nil, &out, &out); code != exitUsage {
		t.Errorf("a library that differs: exit %d, want %d\n%s", code, exitUsage, out.String())
	}
}

func TestHealthcheckAndVersion(t *testing.T) {
	ok := testkit.NewUpstream(t, nil)
	bad := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) })
	var out bytes.Buffer
	if code := run(t.Context(), []string{"healthcheck", "--url", ok.URL}, nil, &out, &out); code != 0 {
		t.Errorf("healthy: exit %d", code)
	}
	if code := run(t.Context(), []string{"healthcheck", "--url", bad.URL}, nil, &out, &out); code != exitFail {
		t.Errorf("unhealthy: exit %d", code)
	}
	if code := run(t.Context(), []string{"healthcheck", "--url", "not a url"}, nil, &out, &out); code != exitUsage {
		t.Errorf("a URL that is none: exit %d, want %d", code, exitUsage)
	}
	// Without --url, the admin address serve would listen on.
	admin := testkit.NewUpstream(t, nil)
	if code := run(t.Context(), []string{"healthcheck"}, []string{"TOOLGATE_LISTEN_ADMIN=" + strings.TrimPrefix(admin.URL, "http://")}, &out, &out); code != 0 || len(admin.Requests()) != 1 || admin.Requests()[0].Path != "/readyz" {
		t.Errorf("TOOLGATE_LISTEN_ADMIN: exit %d, the admin listener got %d requests", code, len(admin.Requests()))
	}
	if got := readyzURL("0.0.0.0:9091"); got != "http://127.0.0.1:9091/readyz" {
		t.Errorf("readyzURL of every address: %s", got)
	}
	out.Reset()
	if code := run(t.Context(), []string{"version"}, nil, &out, &out); code != 0 || !regexp.MustCompile(`OPA 1\.\d+\.\d+`).MatchString(out.String()) {
		t.Errorf("version: exit %d %q", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"opa", "check", "../../rego/lib"}, nil, &out, &out); code != 0 {
		t.Errorf("opa check: exit %d %q", code, out.String())
	}
	failing := writeFiles(t, t.TempDir(), map[string]string{"f_test.rego": "package f_test\ntest_no if false\n"})
	if code := run(t.Context(), []string{"opa", "test", failing}, nil, &out, &out); code != 2 {
		t.Errorf("opa test with a failing test: exit %d, want opa's 2", code)
	}
	// OPA says what went wrong (on the process's stderr), and toolgate
	// does not say it again, as the opa binary does not.
	broken := writeFiles(t, t.TempDir(), map[string]string{"p.rego": "package x\n\np := \n"})
	out.Reset()
	if code := run(t.Context(), []string{"opa", "check", broken}, nil, &out, &out); code == 0 || strings.Contains(out.String(), "rego_parse_error") {
		t.Errorf("opa check of a broken file: exit %d, toolgate repeated OPA's error:\n%s", code, out.String())
	}
}

// TestQuickstart runs the quickstart on free ports and follows its printed
// commands: an allow, a deny and an ask.
func TestQuickstart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	stderr := &testkit.Buffer{}
	done := make(chan int, 1)
	before := listeningSockets(t)
	go func() {
		done <- run(ctx, []string{"quickstart", "--listen-proxy", "127.0.0.1:0", "--listen-approvals", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0"}, nil, io.Discard, stderr)
	}()
	defer func() { cancel(); <-done }()
	re := regexp.MustCompile(`proxy\s+(http://127\.0\.0\.1:\d+)`)
	var proxyURL string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			proxyURL = m[1]
			break
		}
	}
	if proxyURL == "" {
		t.Fatalf("no proxy URL printed:\n%s", stderr.String())
	}
	// Its three listeners and nothing else: the example tools are reached
	// in memory, not on a port a process beside the agent could call.
	if n := listeningSockets(t) - before; n != 3 {
		t.Errorf("the quickstart listens on %d TCP sockets, want its 3 listeners", n)
	}
	for _, tc := range []struct {
		tool, body string
		code       int
		decision   string
	}{
		{"read_file", `{"path":"README.md"}`, 200, "allow"},
		{"read_file", `{"path":".env"}`, 403, "deny"},
		{"delete_file", `{"path":"notes/today.txt"}`, 403, "deny"},
	} {
		code, body := doPost(t, proxyURL+"/tools/"+tc.tool, tc.body, "")
		if code != tc.code || !strings.HasPrefix(body, tc.decision+" ") {
			t.Errorf("%s %s: %d %s", tc.tool, tc.body, code, body)
		}
	}
	// The ask: parked, its approval link printed; approving through the
	// link's page lets an identical retry get the tool's answer.
	write := func(prefer string) (int, string) {
		req, _ := http.NewRequest("POST", proxyURL+"/tools/write_note", strings.NewReader(`{"path":"notes/today.txt","content":"reviewed"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", prefer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := write("respond-async"); code != 202 || !strings.Contains(body, `"status":"waiting"`) {
		t.Fatalf("write_note: %d %s", code, body)
	}
	linkRe := regexp.MustCompile(`>>> (http://\S+/approvals/(\w+)\?token=(\S+))`)
	var m []string
	for deadline := time.Now().Add(5 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m = linkRe.FindStringSubmatch(stderr.String())
	}
	if m == nil {
		t.Fatalf("no approval link printed:\n%s", stderr.String())
	}
	page, err := http.Get(m[1])
	if err != nil || page.StatusCode != 200 {
		t.Fatalf("approval page: %v %v", page, err)
	}
	page.Body.Close()
	res, err := http.PostForm(strings.Split(m[1], "?")[0], url.Values{"token": {m[3]}, "decision": {"approve"}})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("approve: %v %v", res, err)
	}
	res.Body.Close()
	if code, body := write("wait=10"); code != 200 || !strings.Contains(body, `"bytes"`) {
		t.Fatalf("write_note after approval: %d %s", code, body)
	}
	if !strings.Contains(stderr.String(), "curl -s -i -X POST "+proxyURL+"/tools/read_file") {
		t.Errorf("no ready-to-paste curl command:\n%s", stderr.String())
	}
}

// TestShutdownDrainsInFlightCalls: at SIGTERM (the run context ending)
// with a call in flight, the listeners stay open until it is answered:
// readiness answers 503, a new call 503 (not a refused connection), the
// call in flight gets its upstream's answer, and then serve returns.
func TestShutdownDrainsInFlightCalls(t *testing.T) {
	up, arrived, free := slowUpstream(t, func(string) bool { return true })
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": strings.Replace(testConfig(up.URL), "shutdown_grace: 2s", "shutdown_grace: 10s", 1),
		"rules.yaml":    "rules:\n  - {id: r1, effect: allow, tool: Read, target: \"*\"}\n",
		"policy/p.rego": "package toolgate\n",
	})
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	r := startServe(t, []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")}, environ)
	inFlight := callInBackground(r.proxy+"/tools/Read", `{"path":"slow.txt"}`, "agent-key-1-0123456789")
	<-arrived
	r.cancel() // what SIGTERM does to run()
	waitStatus(t, r.admin+"/readyz", http.StatusServiceUnavailable)
	if code, body := doPost(t, r.proxy+"/tools/Read", `{"path":"late.txt"}`, "agent-key-1-0123456789"); code != http.StatusServiceUnavailable {
		t.Fatalf("a new call while draining: %d %s, want 503", code, body)
	}
	select {
	case code := <-r.done:
		t.Fatalf("serve exited %d with a call in flight", code)
	default:
	}
	free()
	if code := <-inFlight; code != 200 {
		t.Fatalf("the call in flight at shutdown: %d, want 200", code)
	}
	select {
	case code := <-r.done:
		if code != 0 {
			t.Fatalf("serve exited %d", code)
		}
		r.done <- code // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return once the call in flight was answered")
	}
	if n := len(up.Requests()); n != 1 {
		t.Fatalf("the upstream received %d calls, want the one in flight", n)
	}
}

// TestShutdownRunsApprovalsMadeWhileDraining: with the memory store, an
// approval accepted while a shutdown drains a call in flight is run before
// the process exits: the store goes with the process, so run then or
// never, and the approver was told "approved".
func TestShutdownRunsApprovalsMadeWhileDraining(t *testing.T) {
	up, arrived, free := slowUpstream(t, func(path string) bool { return strings.HasSuffix(path, "/Read") })
	tg := startReadWrite(t, up.URL, `  approvers: [{name: alice, key: alice-key-0123456789}]
shutdown_grace: 10s
`)
	res, _ := agentCall(t, tg.proxy, "Write", `{"path":"notes/a"}`, "Prefer", "respond-async")
	id := res.Header.Get("X-Toolgate-Call-Id")
	if res.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("the ask: %d, call %q", res.StatusCode, id)
	}
	inFlight := callInBackground(tg.proxy+"/tools/Read", `{"path":"slow.txt"}`, "agent-key-0123456789")
	<-arrived
	tg.cancel() // SIGTERM: the Read keeps the drain going
	waitStatus(t, tg.admin+"/readyz", http.StatusServiceUnavailable)
	req, _ := http.NewRequest(http.MethodPost, tg.approvals+"/api/approvals/"+id, strings.NewReader(`{"decision":"approve"}`))
	req.Header.Set("Authorization", "Bearer alice-key-0123456789")
	req.Header.Set("Content-Type", "application/json")
	ares, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(ares.Body)
	ares.Body.Close()
	if ares.StatusCode != http.StatusOK || !strings.Contains(string(body), `"approved"`) {
		t.Fatalf("approval while draining: %d %s", ares.StatusCode, body)
	}
	free()
	if code := <-inFlight; code != 200 {
		t.Fatalf("the call in flight at shutdown: %d", code)
	}
	select {
	case code := <-tg.done:
		tg.done <- code
	case <-time.After(8 * time.Second):
		t.Fatal("serve did not return")
	}
	writes := 0
	for _, r := range up.Requests() {
		if strings.HasSuffix(r.Path, "/Write") {
			writes++
		}
	}
	if writes != 1 {
		t.Fatalf("the call approved while draining reached the upstream %d times, want 1 (before the process exited)", writes)
	}
}

// slowUpstream is an upstream that holds the requests slow picks (by
// path) until free is called, saying on arrived when one comes.
func slowUpstream(t *testing.T, slow func(path string) bool) (up *testkit.Upstream, arrived <-chan struct{}, free func()) {
	release, came := make(chan struct{}), make(chan struct{}, 16)
	up = testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if slow(r.URL.Path) {
			came <- struct{}{}
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	var once sync.Once
	free = func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the upstream closes, which waits for its handlers
	return up, came, free
}

// startReadWrite starts a replica in front of upstream with one agent
// key, Read allowed and Write asked; more is the rest of its config,
// from the keys under approvals: on.
func startReadWrite(t *testing.T, upstream, more string) replica {
	t.Helper()
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
upstreams: [{name: files, url: ` + upstream + `}]
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent}]
policy: {rules_file: ./rules.yaml}
approvals:
  secret: ` + testSecret + `
` + more,
		"rules.yaml": "rules:\n  - {id: r, effect: allow, tool: Read, target: \"*\"}\n  - {id: w, effect: ask, tool: Write, target: \"*\"}\n",
	})
	return startReplica(t, filepath.Join(dir, "toolgate.yaml"))
}

// callInBackground POSTs body to url as the agent with key, and sends its
// status (0 when it failed) on the channel it returns.
func callInBackground(url, body, key string) <-chan int {
	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		res.Body.Close()
		status <- res.StatusCode
	}()
	return status
}

// waitStatus polls url until it answers want, for up to 5 s.
func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := http.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		res.Body.Close()
		if res.StatusCode == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still answers %d, want %d", url, res.StatusCode, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShutdownWithinGrace: closing (the decision log's last upload, the
// notifier's last deliveries) counts in shutdown_grace, however long the
// services it talks to take: with both silent and nothing in flight, serve
// returns within the grace, not after each closer's own time bound.
func TestShutdownWithinGrace(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() { // accepts, reads, never answers
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	up := testkit.NewUpstream(t, nil)
	tg := startReadWrite(t, up.URL, `  notify: [{url: "http://`+silent.Addr().String()+`/hook", format: cloudevents}]
log:
  decisions:
    service: {url: "http://`+silent.Addr().String()+`", min_delay: 1s, max_delay: 1s}
shutdown_grace: 1s
`)
	if res, _ := agentCall(t, tg.proxy, "Read", `{"path":"a"}`); res.StatusCode != 200 {
		t.Fatalf("allowed call: %d", res.StatusCode)
	}
	if res, _ := agentCall(t, tg.proxy, "Write", `{"path":"a"}`, "Prefer", "respond-async"); res.StatusCode != http.StatusAccepted {
		t.Fatalf("asked call: %d", res.StatusCode)
	}
	time.Sleep(1500 * time.Millisecond) // an upload and a delivery under way, neither answered
	start := time.Now()
	tg.cancel()
	select {
	case code := <-tg.done:
		tg.done <- code
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return")
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("serve returned %v after shutdown began; shutdown_grace is 1s\n%s", took.Round(time.Millisecond), tg.stderr.String())
	}
}

// listeningSockets counts this process's listening TCP sockets: the
// inodes of its socket descriptors among the LISTEN entries (state 0A) of
// /proc/net/tcp and tcp6.
func listeningSockets(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("listening sockets (Linux' /proc): %v", err)
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if inode, ok := strings.CutPrefix(link, "socket:["); ok {
				mine[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 9 && f[3] == "0A" && mine[f[9]] {
				n++
			}
		}
	}
	return n
}
