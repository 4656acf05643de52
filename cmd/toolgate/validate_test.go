package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// validateConfig is a configuration both commands accept, with the
// upstream prefix, the identity section and the policy directory to vary.
func validateConfig(prefix, identity, policyDir string) string {
	return `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://127.0.0.1:8081
upstreams:
  - name: files
    url: http://127.0.0.1:9001
    prefix: "` + prefix + `"
identity:
` + identity + `
policy:
  dir: ./` + policyDir + `
approvals:
  secret: ${TOOLGATE_APPROVALS_SECRET}
shutdown_grace: 1s
`
}

const anonymous = "  anonymous: true"

// refusal is the message of a refused start or validation, without the
// command's own prefix, and without log lines.
func refusal(stderr string) string {
	var lines []string
	for l := range strings.Lines(stderr) {
		if !strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	msg := strings.Join(lines, "")
	for _, prefix := range []string{
		"toolgate: configuration refused: toolgate serve would not start: ", // validate
		"toolgate: configuration refused:\n",                                // both
		"toolgate: cannot start: ",                                          // serve
	} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return strings.TrimSpace(msg)
}

// TestValidateRefusesWhatServeRefuses holds `config validate` and `serve`
// to each other: a configuration validate calls valid starts, and one serve
// refuses validate refuses, in the same words.
func TestValidateRefusesWhatServeRefuses(t *testing.T) {
	good := map[string]string{
		"policy/p.rego": "package toolgate\n\nallow if input.tool.name == \"Read\"\n",
	}
	cases := []struct {
		name  string
		files map[string]string // toolgate.yaml and more, over good
		args  []string
		want  string // a part of the refusal; "" when both accept
	}{
		{"good", map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy")}, nil, ""},
		{
			"redis down does not stop a start",
			map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy") + "pending: {store: redis, redis_url: \"redis://127.0.0.1:1/0\"}\n"},
			nil, "",
		},
		{
			"decision log and notifier",
			map[string]string{"toolgate.yaml": strings.Replace(validateConfig("/", anonymous, "policy"),
				"approvals:\n", "approvals:\n  notify: [{url: \"http://127.0.0.1:1/hook\"}]\n", 1) +
				"log: {decisions: {console: true}}\n"},
			nil, "",
		},

		{"prefix with a space", map[string]string{"toolgate.yaml": validateConfig("/my tools/", anonymous, "policy")}, nil, `"/my tools/" must start and end with /`},
		{
			// Identity is built after the store, the notifier and the
			// decision log: what was opened before it is closed (the
			// goroutine check below fails otherwise).
			"missing jwks_file, after the store, notifier and decision log",
			map[string]string{"toolgate.yaml": strings.Replace(
				validateConfig("/", "  jwt: {jwks_file: ./missing.json, issuer: https://idp.example.com, audience: [toolgate]}", "policy"),
				"approvals:\n", "approvals:\n  notify: [{url: \"http://127.0.0.1:1/hook\"}]\n", 1) +
				"log: {decisions: {console: true}}\npending: {store: redis, redis_url: \"redis://127.0.0.1:1/0\"}\n"},
			nil, "identity.jwt.jwks_file: reading",
		},
		{
			"jwks over http",
			map[string]string{"toolgate.yaml": validateConfig("/", "  jwt: {jwks_url: http://idp.example.com/jwks, issuer: https://idp.example.com, audience: [toolgate]}", "policy")},
			nil, "identity.jwt.jwks_url: must be an https:// URL",
		},
		{
			"redis database not a number",
			map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy") + "pending: {store: redis}\n"},
			[]string{"--redis-url", "redis://127.0.0.1:6379/99x"},
			`pending.redis_url: redis: invalid database number: "99x"`,
		},
		{"policy does not compile", map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy"), "policy/p.rego": "package toolgate\nallow if {"}, nil, "p.rego"},
		{"policy directory missing", map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "nowhere")}, nil, "is not a readable directory"},
		{
			"jwks file missing",
			map[string]string{"toolgate.yaml": validateConfig("/", "  jwt: {jwks_file: ./missing.json, issuer: https://idp.example.com, audience: [toolgate]}", "policy")},
			nil, "identity.jwt.jwks_file: reading",
		},
		{
			"api key with a trailing newline",
			map[string]string{"toolgate.yaml": validateConfig("/", "  api_keys: [{key: \"k1\\n\", subject: agent}]", "policy")},
			nil, "identity.api_keys[0].key: contains whitespace",
		},
		{
			"api key shorter than 16 bytes",
			map[string]string{"toolgate.yaml": validateConfig("/", "  api_keys: [{key: \"${SHORT_KEY}\", subject: agent}]", "policy")},
			nil,
			"identity.api_keys[0].key: is shorter than 16 bytes (generate one with: openssl rand -hex 32)",
		},
		{
			"approver key shorter than 16 bytes",
			map[string]string{"toolgate.yaml": strings.Replace(validateConfig("/", anonymous, "policy"),
				"approvals:\n", "approvals:\n  approvers: [{name: alice, key: alice-key}]\n", 1)},
			nil, "approvals.approvers[0].key: is shorter than 16 bytes (generate one with: openssl rand -hex 32)",
		},
		{
			"slack signing secret shorter than 16 bytes",
			map[string]string{"toolgate.yaml": strings.Replace(validateConfig("/", anonymous, "policy"),
				"approvals:\n", "approvals:\n  slack: {signing_secret: 0123abcd, users: {U1: alice}}\n", 1)},
			nil, "approvals.slack.signing_secret: is shorter than 16 bytes",
		},
		{
			"hook secret shorter than 16 bytes",
			map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy") + "hooks: [{name: freeze, url: \"http://127.0.0.1:1/hook\", secret: hook-secret}]\n"},
			nil, "hooks[0].secret: is shorter than 16 bytes",
		},
		{
			"api key subject reserved",
			map[string]string{"toolgate.yaml": validateConfig("/", "  api_keys: [{key: agent-key-0123456789, subject: anonymous}]", "policy")},
			nil, `identity.api_keys[0].subject: "anonymous" is reserved`,
		},
		{"unknown mode", map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy")}, []string{"--policy-mode", "yolo"}, `policy.mode: "yolo" is not allowed`},
		{
			"redis URL option not a duration",
			map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy") + "pending: {store: redis, redis_url: \"redis://127.0.0.1:6379/0?dial_timeout=soon\"}\n"},
			nil, "pending.redis_url: redis: invalid dial_timeout",
		},
		{
			"redis cluster option not a number",
			map[string]string{"toolgate.yaml": validateConfig("/", anonymous, "policy") + "pending: {store: redis, redis_url: \"redis+cluster://127.0.0.1:7000?max_retries=many\"}\n"},
			nil, "pending.redis_url: redis: invalid max_retries",
		},
	}
	// SHORT_KEY is expanded after loading, as a secret passed by ${NAME} is.
	environ := []string{"TOOLGATE_APPROVALS_SECRET=" + testSecret, "SHORT_KEY=agent-key-1"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			maps.Copy(files, good)
			maps.Copy(files, tc.files)
			dir := writeFiles(t, t.TempDir(), files)
			args := append([]string{"--config", filepath.Join(dir, "toolgate.yaml")}, tc.args...)

			var vout, verr bytes.Buffer
			before := runtime.NumGoroutine()
			vcode := run(t.Context(), append([]string{"config", "validate"}, args...), environ, &vout, &verr)
			// Accepted or refused, validate closes what it opened.
			checkGoroutines(t, before)

			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			serr := &testkit.Buffer{}
			scode := run(ctx, append([]string{"serve"}, args...), environ, io.Discard, serr)
			started := strings.Contains(serr.String(), `"msg":"toolgate listening"`)

			if tc.want == "" {
				if vcode != exitOK || !started || scode != exitOK {
					t.Fatalf("validate exit %d:\n%s\nserve exit %d, started %t:\n%s", vcode, verr.String(), scode, started, serr.String())
				}
				return
			}
			if vcode == exitOK || scode == exitOK || started {
				t.Fatalf("validate exit %d:\n%s\nserve exit %d, started %t:\n%s\nwant both to refuse", vcode, verr.String(), scode, started, serr.String())
			}
			vmsg, smsg := refusal(verr.String()), refusal(serr.String())
			if vmsg != smsg {
				t.Errorf("validate and serve refuse in other words:\nvalidate: %s\nserve:    %s", vmsg, smsg)
			}
			if !strings.Contains(vmsg, tc.want) {
				t.Errorf("validate: %q, want it to contain %q", vmsg, tc.want)
			}
			if strings.Contains(verr.String()+serr.String(), testSecret) {
				t.Error("the secret was printed")
			}
		})
	}
}

// checkGoroutines fails the test when goroutines started since before
// (validate's) are still running after a while.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= before {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Errorf("validate left %d goroutines running:\n%s", n-before, buf[:runtime.Stack(buf, true)])
}

// TestMisshapenRuleStartsAndDenies: a decision rule of the wrong shape
// (allow := 5) does not stop toolgate: config validate warns, naming the
// rule and its line, serve starts and logs it, and every call the rule
// reaches is denied as a policy error, never forwarded.
func TestMisshapenRuleStartsAndDenies(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": testConfig(up.URL),
		"rules.yaml":    "rules: []\n",
		"policy/p.rego": "package toolgate\n\nallow := 5\n",
	})
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	args := []string{"--config", filepath.Join(dir, "toolgate.yaml")}
	var vout, verr bytes.Buffer
	if code := run(t.Context(), append([]string{"config", "validate"}, args...), environ, &vout, &verr); code != exitOK ||
		!strings.Contains(verr.String(), "warning") || !strings.Contains(verr.String(), "p.rego:3: rule allow must be a boolean or a set of reasons, not a number") {
		t.Fatalf("validate exit %d:\n%s", code, verr.String())
	}
	verr.Reset()
	if code := run(t.Context(), append([]string{"config", "validate", "--strict"}, args...), environ, &vout, &verr); code != exitUsage {
		t.Fatalf("validate --strict exit %d, want 2:\n%s", code, verr.String())
	}
	r := startServe(t, append([]string{"serve"}, args...), environ)
	if !strings.Contains(r.stderr.String(), "rules that cannot decide a call") {
		t.Errorf("serve did not log the misshapen rule:\n%s", r.stderr.String())
	}
	res, err := http.Get(r.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	ready, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(ready), `"misshapen_rules":"policy: p.rego:3: rule allow`) {
		t.Errorf("readyz: %d %s, want 200 naming the misshapen rule", res.StatusCode, ready)
	}
	code, body := doPost(t, r.proxy+"/tools/Read", `{"path":"a.txt"}`, "agent-key-1-0123456789")
	if code != 403 || !strings.Contains(body, "toolgate.policy_error") {
		t.Fatalf("a call allow := 5 reaches: %d %s, want a policy error's 403", code, body)
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("the upstream received %d calls", n)
	}
}
