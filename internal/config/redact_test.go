package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestRedacted_HidesSecrets(t *testing.T) {
	c := mustLoad(t, Source{
		File:    writeConfig(t, specExample),
		Environ: specEnv,
		Flags: map[string]any{
			"pending.store":     "redis",
			"pending.redis_url": "rediss://:" + testRedisPassword + "@redis.example.com:6380/0",
		},
	})
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secretsOf(c) {
		if strings.Contains(string(out), s) {
			t.Errorf("Redacted() shows secret %q:\n%s", s, out)
		}
	}
	for _, s := range []string{testApprovalsSecret, testAgentKey, testAliceKey, testWebhookSecret, testRedisPassword} {
		if strings.Contains(string(out), s) {
			t.Errorf("Redacted() shows %q:\n%s", s, out)
		}
	}

	var doc struct {
		Approvals struct {
			Secret    string
			Approvers []struct{ Key string }
			Notify    []struct{ Secret string }
		}
		Pending struct {
			RedisURL string `yaml:"redis_url"`
		}
		Identity struct {
			APIKeys []struct{ Key string } `yaml:"api_keys"`
		}
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("Redacted() is not YAML: %v\n%s", err, out)
	}
	got := []string{
		doc.Approvals.Secret, doc.Approvals.Approvers[0].Key, doc.Approvals.Notify[0].Secret,
		doc.Pending.RedisURL, doc.Identity.APIKeys[0].Key,
	}
	want := []string{"[redacted]", "[redacted]", "[redacted]", "[redacted]", "[redacted]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("redacted values (-want +got):\n%s", diff)
	}
}

func TestRedacted_Output(t *testing.T) {
	c := Config{
		Upstreams: []Upstream{{Name: "notes", URL: "http://user:pass@127.0.0.1:9001", StripHeaders: []string{"x-internal-user"}}},
		Identity:  Identity{Anonymous: true},
		Policy:    Policy{Dir: "/srv/policy", Capabilities: []string{"http.send"}},
		Approvals: Approvals{
			Secret: testApprovalsSecret,
			Notify: []Notify{
				{URL: "https://hooks.slack.com/services/T000/B000/XXXXXXXX", Format: "slack"},
				{URL: "https://events.example.com", Secret: ""},
			},
		},
		Limits: Limits{MaxBodyBytes: 64000, MaxParked: 500},
	}
	c.ApplyDefaults()
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	want := `listen:
  proxy: 127.0.0.1:8080
  approvals: 127.0.0.1:8081
  admin: 127.0.0.1:9090
public_url: http://127.0.0.1:8081
proxy_public_url: ""
upstreams:
  - name: notes
    url: http://REDACTED@127.0.0.1:9001
    protocol: rest
    prefix: /
    mcp_path: /mcp
    target_args: [path, file_path, file, filename, target, url, uri, command]
    timeout: 1m
    tool_query: false
    target_fold: none
    strip_headers: [X-Internal-User]
    mode: ""
    enforce: null
identity:
  api_keys: []
  jwt: null
  anonymous: true
  browser_origins: []
policy:
  dir: /srv/policy
  rules_file: ""
  mode: default
  default: deny
  watch: true
  capabilities: [http.send]
  enforce: true
  subject_modes: {}
  mode_header: null
hooks: []
pending:
  store: memory
  redis_url: ""
  redis_prefix: ""
  redis_min_replicas: 0
  redis_replica_timeout: 0s
  redis_shards: 0
  hold: 25s
  ttl: 1h
  result_ttl: 24h
  max_result_bytes: 1MiB
  fail_readiness: false
approvals:
  secret: '[redacted]'
  previous_secrets: []
  approvers: []
  notify:
    - url: https://hooks.slack.com/[redacted]
      format: slack
      secret: ""
      concurrency: 4
    - url: https://events.example.com
      format: cloudevents
      secret: ""
      concurrency: 4
  identity: null
  slack: null
  requester_sign_in: false
limits:
  max_body_bytes: 64000B
  max_body_bytes_total: 64MiB
  body_timeout: 10s
  max_parked_per_subject: 100
  max_parked: 500
  max_parks_per_minute: 0
  max_held_per_subject: 100
  max_forwards_per_subject: 1000
  max_hook_requests: 256
  max_connections: 10000
  max_connections_per_source: 0
  lossy_numbers: refuse
log:
  level: info
  arguments: false
  decisions:
    console: true
    mask_decision: /system/log/mask
    drop_decision: /system/log/drop
    service:
      url: ""
      resource: /logs
      token: ""
      timeout: 10s
      buffer_bytes: 16MiB
      min_delay: 5s
      max_delay: 30s
shutdown_grace: 20s
`
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("Redacted() (-want +got):\n%s", diff)
	}
}

// TestRedacted_Reloads checks that the output is a configuration file Load
// accepts key for key: only the redacted secrets are refused.
func TestRedacted_Reloads(t *testing.T) {
	c := mustLoad(t, Source{File: writeConfig(t, specExample), Environ: specEnv})
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "effective.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(Source{File: path})
	// "[redacted]" (10 bytes) is too short for every secret, and the
	// approver's key also equals the agent's.
	want := []string{"identity.api_keys[0].key", "approvals.secret", "approvals.approvers[0].key", "approvals.notify[0].secret"}
	if diff := cmp.Diff(want, errorKeys(err)); diff != "" {
		t.Errorf("reloading Redacted() (-want +got):\n%s\nerror: %v", diff, err)
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct {
		in       string
		hidePath bool
		want     string
	}{
		{"http://127.0.0.1:9001", false, "http://127.0.0.1:9001"},
		{"https://u:p@host/x", false, "https://REDACTED@host/x"},
		{"https://token@host/x", false, "https://REDACTED@host/x"},
		{"https://host/jwks.json?token=abc", false, "https://host/jwks.json?REDACTED"},
		{"https://host/hook?token=abc", true, "https://host/[redacted]"},
		{"https://host/services/T/B/X", true, "https://host/[redacted]"},
		{"https://u:p@host", true, "https://host/[redacted]"},
		{"https://host/", true, "https://host/"},
		{"", true, ""},
		{"http://h:port", false, "[redacted]"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in, tt.hidePath); got != tt.want {
			t.Errorf("redactURL(%q, %v) = %q, want %q", tt.in, tt.hidePath, got, tt.want)
		}
	}
}

// TestRedacted_PreviousSecrets: previous approval secrets never print.
func TestRedacted_PreviousSecrets(t *testing.T) {
	c := mustLoad(t, Source{File: writeConfig(t, specExample), Environ: specEnv})
	old := "previous-approvals-secret-0123456789abcdefghij"
	c.Approvals.PreviousSecrets = []Secret{Secret(old)}
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), old) || !strings.Contains(string(out), "previous_secrets: ['[redacted]']") {
		t.Errorf("Redacted() shows previous_secrets as:\n%s", out)
	}
}

// TestRedacted_URLQueries: a token in the query of a hook's, the JWKS's
// or the log service's URL is not printed; what the URL names is.
func TestRedacted_URLQueries(t *testing.T) {
	c := Config{
		Hooks:    []Hook{{Name: "h", URL: "https://hooks.example.com/pre?hooktoken=HOOK-QS"}},
		Identity: Identity{JWT: &JWT{JWKSURL: "https://idp.example.com/jwks?jwkstoken=JWKS-QS"}},
		Log:      Log{Decisions: Decisions{Service: DecisionService{URL: "https://logs.example.com/svc?dltoken=DL-QS"}}},
	}
	c.ApplyDefaults()
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"HOOK-QS", "JWKS-QS", "DL-QS"} {
		if strings.Contains(string(out), s) {
			t.Errorf("Redacted() shows %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"https://hooks.example.com/pre?REDACTED", "https://idp.example.com/jwks?REDACTED", "https://logs.example.com/svc?REDACTED"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("Redacted() lacks %q:\n%s", s, out)
		}
	}
}
