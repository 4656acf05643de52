package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// specExample is a commented configuration file that sets the documented keys
// (docs/configuration.md).
const specExample = `
listen:
  proxy: 127.0.0.1:8080        # agents send tool calls here
  approvals: 127.0.0.1:8081    # humans and bots decide here; never the same port as proxy
  admin: 127.0.0.1:9090        # /livez /readyz /metrics
public_url: https://toolgate.example.com   # base of the links sent to approvers (the approvals listener as seen from outside)

upstreams:                     # at least one
  - name: notes
    url: http://127.0.0.1:9001
    protocol: rest             # rest (default) | mcp
    prefix: /                  # requests under this path prefix go to this upstream; a prefix other than "/" is stripped
    mcp_path: /mcp             # for protocol mcp: the JSON-RPC endpoint path at the upstream
    target_args: [path, file_path, file, filename, target, url, uri, command]   # default list, first string found wins
    tool_query: false          # true: a REST tool call may carry a query string
    target_fold: none          # none | windows
    strip_headers: [x-internal-user]   # never sent to this upstream

identity:                      # who the caller is; never taken from tool arguments
  api_keys:                    # Authorization: Bearer <key>
    - key: ${AGENT_KEY}
      subject: agent-42
      groups: [agents]
  jwt:                         # optional: verified bearer JWTs (jwks_file or jwks_url, issuer, audience)
  anonymous: true              # true: requests without credentials get subject "anonymous"; false: 401

policy:
  dir: ./policy                # .rego modules plus data files (.json/.yaml); watched and hot-reloaded
  rules_file: ./rules.yaml     # optional rules table (docs/policy.md), also watched
  mode: default                # default | dont_ask | plan | bypass
  capabilities: []             # extra built-ins allowed (e.g. http.send), none by default

pending:
  store: memory                # memory (single instance) | redis
  redis_url: redis://127.0.0.1:6379/0   # rediss:// for TLS; sentinel and cluster URLs are welcome
  hold: 25s                    # how long the agent's request is held open waiting for a decision
  ttl: 1h                      # how long an unanswered call stays waiting before it expires
  result_ttl: 24h              # how long an executed call's stored result can be fetched
  max_result_bytes: 1MiB

approvals:
  secret: ${TOOLGATE_APPROVALS_SECRET}   # HMAC key for approval links (>= 32 bytes), required
  approvers:                   # bearer keys for the approvals API (the page is authorised by the link token)
    - name: alice
      key: ${ALICE_KEY}
  notify:                      # every parked call is announced to each entry
    - url: https://hooks.example.com/toolgate
      format: cloudevents      # cloudevents | slack | teams
      secret: ${WEBHOOK_SECRET}   # Standard Webhooks signature when set

limits:
  max_body_bytes: 1MiB
  body_timeout: 10s            # the whole request body must arrive within this, else 408
  max_parked_per_subject: 100  # waiting + approved calls one principal may have; past it 429
  max_parked: 10000            # the same across all principals (per store)
  lossy_numbers: refuse        # refuse | allow: JSON numbers that do not survive a float64 round trip
`

// specEnv supplies the ${} references of specExample.
var specEnv = []string{
	"AGENT_KEY=" + testAgentKey,
	"TOOLGATE_APPROVALS_SECRET=" + testApprovalsSecret,
	"ALICE_KEY=" + testAliceKey,
	"WEBHOOK_SECRET=" + testWebhookSecret,
	"HOME=/root", // unrelated variables are ignored
}

func TestLoad_SpecExample(t *testing.T) {
	path := writeConfig(t, specExample)
	dir := filepath.Dir(path)
	got := mustLoad(t, Source{File: path, Environ: specEnv})

	want := &Config{
		Listen:    Listen{Proxy: "127.0.0.1:8080", Approvals: "127.0.0.1:8081", Admin: "127.0.0.1:9090"},
		PublicURL: "https://toolgate.example.com",
		Upstreams: []Upstream{{
			Name:       "notes",
			URL:        "http://127.0.0.1:9001",
			Protocol:   "rest",
			Prefix:     "/",
			MCPPath:    "/mcp",
			TargetArgs: []string{"path", "file_path", "file", "filename", "target", "url", "uri", "command"},
			Timeout:    Duration(60 * time.Second),
			TargetFold: "none",
			// Written in canonical form.
			StripHeaders: []string{"X-Internal-User"},
		}},
		Identity: Identity{
			APIKeys:   []APIKey{{Key: testAgentKey, Subject: "agent-42", Groups: []string{"agents"}}},
			Anonymous: true,
		},
		Policy: Policy{
			Dir:          filepath.Join(dir, "policy"),
			RulesFile:    filepath.Join(dir, "rules.yaml"),
			Mode:         "default",
			Default:      "deny",
			Watch:        new(true),
			Enforce:      new(true),
			Capabilities: []string{},
		},
		Pending: Pending{
			Store:          "memory",
			RedisURL:       "redis://127.0.0.1:6379/0",
			Hold:           Duration(25 * time.Second),
			TTL:            Duration(time.Hour),
			ResultTTL:      Duration(24 * time.Hour),
			MaxResultBytes: 1 << 20,
		},
		Approvals: Approvals{
			Secret:    testApprovalsSecret,
			Approvers: []Approver{{Name: "alice", Key: testAliceKey}},
			Notify:    []Notify{{URL: "https://hooks.example.com/toolgate", Format: "cloudevents", Secret: testWebhookSecret, Concurrency: 4}},
		},
		Limits: Limits{
			MaxBodyBytes:          1 << 20,
			MaxBodyBytesTotal:     64 << 20,
			BodyTimeout:           Duration(10 * time.Second),
			MaxParkedPerSubject:   100,
			MaxParked:             10000,
			MaxHeldPerSubject:     100,
			MaxForwardsPerSubject: 1000,
			MaxHookRequests:       256,
			MaxConnections:        10000,
			LossyNumbers:          "refuse",
		},
		Log:           Log{Level: "info", Decisions: defaultDecisions()},
		ShutdownGrace: Duration(20 * time.Second),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(README example) (-want +got):\n%s", diff)
	}
}

// TestLoad_EnvReplacesMappings: a mapping set by the environment replaces
// the file's whole, as any other value does, rather than adding to it.
func TestLoad_EnvReplacesMappings(t *testing.T) {
	path := writeConfig(t, `
upstreams: [{name: notes, url: http://127.0.0.1:9001}]
identity: {api_keys: [{key: k0123456789abcdef, subject: ci-bot}, {key: k1123456789abcdef, subject: agent-42}]}
policy: {dir: /srv/policy, subject_modes: {ci-bot: dont_ask}}
approvals: {secret: "${SECRET}"}
`)
	c := mustLoad(t, Source{File: path, Environ: []string{"SECRET=" + testApprovalsSecret, "TOOLGATE_POLICY_SUBJECT_MODES=agent-42=plan"}})
	if diff := cmp.Diff(map[string]string{"agent-42": "plan"}, c.Policy.SubjectModes); diff != "" {
		t.Errorf("subject_modes (-want +got):\n%s", diff)
	}
}

func TestLoad_NoFile(t *testing.T) {
	// Without a file, the environment and flags can set every key except
	// lists of mappings, so upstreams is the one thing missing.
	err := loadErr(t, Source{
		Environ: []string{
			"TOOLGATE_APPROVALS_SECRET=" + testApprovalsSecret,
			"TOOLGATE_IDENTITY_ANONYMOUS=true",
		},
		Flags: map[string]any{"policy.dir": "policy"},
	})
	if diff := cmp.Diff([]string{"upstreams"}, errorKeys(err)); diff != "" {
		t.Errorf("error keys (-want +got):\n%s", diff)
	}
}

func TestLoad_Precedence(t *testing.T) {
	tests := []struct {
		name  string
		file  string // appended to minimalYAML
		env   []string
		flags map[string]any
		get   func(*Config) any
		want  any
	}{
		{
			name: "default",
			get:  func(c *Config) any { return c.Listen.Proxy },
			want: "127.0.0.1:8080",
		},
		{
			name: "file over default",
			file: "listen:\n  proxy: 127.0.0.1:7000\n",
			get:  func(c *Config) any { return c.Listen.Proxy },
			want: "127.0.0.1:7000",
		},
		{
			name: "env over file",
			file: "listen:\n  proxy: 127.0.0.1:7000\n",
			env:  []string{"TOOLGATE_LISTEN_PROXY=127.0.0.1:7001"},
			get:  func(c *Config) any { return c.Listen.Proxy },
			want: "127.0.0.1:7001",
		},
		{
			name:  "flag over env",
			file:  "listen:\n  proxy: 127.0.0.1:7000\n",
			env:   []string{"TOOLGATE_LISTEN_PROXY=127.0.0.1:7001"},
			flags: map[string]any{"listen.proxy": "127.0.0.1:7002"},
			get:   func(c *Config) any { return c.Listen.Proxy },
			want:  "127.0.0.1:7002",
		},
		{
			name:  "an empty variable counts as unset",
			file:  "log:\n  level: warn\n",
			env:   []string{"TOOLGATE_LOG_LEVEL="},
			get:   func(c *Config) any { return c.Log.Level },
			want:  "warn",
			flags: nil,
		},
		{
			name: "env sets a key the file does not have",
			env:  []string{"TOOLGATE_LOG_LEVEL=debug"},
			get:  func(c *Config) any { return c.Log.Level },
			want: "debug",
		},
		{
			name:  "flag over file, env unset",
			file:  "log:\n  level: warn\n",
			flags: map[string]any{"log.level": "error"},
			get:   func(c *Config) any { return c.Log.Level },
			want:  "error",
		},
		{
			name: "duration: env as bare seconds over file",
			file: "pending:\n  hold: 10s\n",
			env:  []string{"TOOLGATE_PENDING_HOLD=5"},
			get:  func(c *Config) any { return c.Pending.Hold.Std() },
			want: 5 * time.Second,
		},
		{
			name:  "duration: time.Duration flag over env",
			env:   []string{"TOOLGATE_PENDING_HOLD=5"},
			flags: map[string]any{"pending.hold": 3 * time.Second},
			get:   func(c *Config) any { return c.Pending.Hold.Std() },
			want:  3 * time.Second,
		},
		{
			name: "bool: env false over default true",
			env:  []string{"TOOLGATE_POLICY_WATCH=false"},
			get:  func(c *Config) any { return c.Policy.Watching() },
			want: false,
		},
		{
			name:  "bool: flag over env",
			env:   []string{"TOOLGATE_POLICY_WATCH=false"},
			flags: map[string]any{"policy.watch": true},
			get:   func(c *Config) any { return c.Policy.Watching() },
			want:  true,
		},
		{
			name: "size: env over file",
			file: "limits:\n  max_body_bytes: 1MiB\n",
			env:  []string{"TOOLGATE_LIMITS_MAX_BODY_BYTES=64kB"},
			get:  func(c *Config) any { return c.Limits.MaxBodyBytes.Int64() },
			want: int64(64000),
		},
		{
			name: "secret: env over file",
			env:  []string{"TOOLGATE_APPROVALS_SECRET=" + strings.Repeat("z", 40)},
			get:  func(c *Config) any { return c.Approvals.Secret.Reveal() },
			want: strings.Repeat("z", 40),
		},
		{
			name: "list of strings: env is comma-separated",
			file: "identity:\n  jwt:\n    jwks_url: https://idp.example.com/jwks\n    issuer: https://idp.example.com\n    audience: [toolgate]\n",
			env:  []string{"TOOLGATE_IDENTITY_JWT_AUDIENCE=a, b,,c"},
			get:  func(c *Config) any { return c.Identity.JWT.Audience },
			want: []string{"a", "b", "c"},
		},
		{
			name: "list entry: env overrides a key of an existing entry",
			env:  []string{"TOOLGATE_UPSTREAMS_0_URL=http://127.0.0.1:9555"},
			get:  func(c *Config) any { return c.Upstreams[0].URL },
			want: "http://127.0.0.1:9555",
		},
		{
			name: "list entry: list of strings inside an entry",
			env:  []string{"TOOLGATE_UPSTREAMS_0_TARGET_ARGS=path,url"},
			get:  func(c *Config) any { return c.Upstreams[0].TargetArgs },
			want: []string{"path", "url"},
		},
		{
			name: "list entry: duration inside an entry",
			env:  []string{"TOOLGATE_UPSTREAMS_0_TIMEOUT=2m"},
			get:  func(c *Config) any { return c.Upstreams[0].Timeout.Std() },
			want: 2 * time.Minute,
		},
		{
			name: "integer: file over default",
			file: "limits:\n  max_parked: 500\n",
			get:  func(c *Config) any { return c.Limits.MaxParked },
			want: 500,
		},
		{
			name: "integer: env over file",
			file: "limits:\n  max_parked: 500\n",
			env:  []string{"TOOLGATE_LIMITS_MAX_PARKED= 20000 "},
			get:  func(c *Config) any { return c.Limits.MaxParked },
			want: 20000,
		},
		{
			name: "integer: written as a float with no fraction",
			file: "limits:\n  max_parked: 1e4\n  max_parked_per_subject: 50.0\n",
			get:  func(c *Config) any { return [2]int{c.Limits.MaxParked, c.Limits.MaxParkedPerSubject} },
			want: [2]int{10000, 50},
		},
		{
			name: "integer: written as a float with no fraction, in the environment",
			env:  []string{"TOOLGATE_LIMITS_MAX_PARKED=1e4", "TOOLGATE_LIMITS_MAX_PARKED_PER_SUBJECT=50.0"},
			get:  func(c *Config) any { return [2]int{c.Limits.MaxParked, c.Limits.MaxParkedPerSubject} },
			want: [2]int{10000, 50},
		},
		{
			name:  "integer: flag over env",
			env:   []string{"TOOLGATE_LIMITS_MAX_PARKED_PER_SUBJECT=7"},
			flags: map[string]any{"limits.max_parked_per_subject": 9},
			get:   func(c *Config) any { return c.Limits.MaxParkedPerSubject },
			want:  9,
		},
		{
			name:  "integer: string flag",
			flags: map[string]any{"limits.max_parked_per_subject": "12", "limits.max_parked": int64(12)},
			get:   func(c *Config) any { return [2]int{c.Limits.MaxParked, c.Limits.MaxParkedPerSubject} },
			want:  [2]int{12, 12},
		},
		{
			name: "limits: env over file",
			file: "limits:\n  body_timeout: 30s\n  lossy_numbers: refuse\n",
			env:  []string{"TOOLGATE_LIMITS_BODY_TIMEOUT=3", "TOOLGATE_LIMITS_LOSSY_NUMBERS=allow"},
			get:  func(c *Config) any { return []any{c.Limits.BodyTimeout.Std(), c.Limits.LossyNumbers} },
			want: []any{3 * time.Second, "allow"},
		},
		{
			name: "upstream: env sets the keys of an entry",
			env: []string{
				"TOOLGATE_UPSTREAMS_0_TOOL_QUERY=true", "TOOLGATE_UPSTREAMS_0_TARGET_FOLD=windows",
				"TOOLGATE_UPSTREAMS_0_STRIP_HEADERS=x-internal-user, X-Tenant",
			},
			get: func(c *Config) any {
				u := c.Upstreams[0]
				return []any{u.ToolQuery, u.TargetFold, u.StripHeaders}
			},
			want: []any{true, "windows", []string{"X-Internal-User", "X-Tenant"}},
		},
		{
			name: "policy.capabilities: env is comma-separated",
			env:  []string{"TOOLGATE_POLICY_CAPABILITIES=http.send,net.lookup_ip_addr"},
			get:  func(c *Config) any { return c.Policy.Capabilities },
			want: []string{"http.send", "net.lookup_ip_addr"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, minimalYAML+tt.file)
			c := mustLoad(t, Source{File: path, Environ: withEnv(tt.env...), Flags: tt.flags})
			if diff := cmp.Diff(tt.want, tt.get(c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoad_Expansion(t *testing.T) {
	tests := []struct {
		name string
		yaml string // the value of identity.api_keys[0].subject
		env  []string
		want string
	}{
		{"reference", "${WHO}", []string{"WHO=agent-7"}, "agent-7"},
		{"inside text", "team-${WHO}", []string{"WHO=7"}, "team-7"},
		{"fallback when unset", "${WHO:-agent-0}", nil, "agent-0"},
		{"fallback when empty", "${WHO:-agent-0}", []string{"WHO="}, "agent-0"},
		{"escape", "$${WHO}", []string{"WHO=agent-7"}, "${WHO}"},
		{"colons and newlines stay one string", `"${WHO}"`, []string{"WHO=x: 1\ny: [2]\nsubject: evil"}, "x: 1\ny: [2]\nsubject: evil"},
		{"a reference in the value is not expanded", "${WHO}", []string{"WHO=${OTHER}", "OTHER=no"}, "${OTHER}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, minimalYAML+"identity:\n  api_keys:\n    - key: "+testAgentKey+"\n      subject: "+tt.yaml+"\n")
			c := mustLoad(t, Source{File: path, Environ: withEnv(tt.env...)})
			if got := c.Identity.APIKeys[0].Subject; got != tt.want {
				t.Errorf("subject = %q, want %q", got, tt.want)
			}
			if got := len(c.Identity.APIKeys); got != 1 {
				t.Errorf("%d api_keys, want 1: an expanded value must not add keys", got)
			}
		})
	}
}

func TestLoad_ExpansionTypes(t *testing.T) {
	// Values that are not strings arrive as text through ${} and are read
	// like environment values.
	path := writeConfig(t, `
upstreams:
  - name: notes
    url: ${UPSTREAM_URL:-http://127.0.0.1:9001}
    timeout: ${TIMEOUT}
    target_args: ${ARGS}
identity:
  anonymous: ${ANON}
policy:
  dir: ${POLICY_DIR}
  watch: ${WATCH:-false}
pending:
  max_result_bytes: ${MAX}
approvals:
  secret: ${SECRET}
limits:
  max_parked: ${MAX_PARKED}
`)
	c := mustLoad(t, Source{File: path, Environ: []string{
		"TIMEOUT=90", "ARGS=path, url", "ANON=true", "POLICY_DIR=rel/policy", "MAX=2MiB", "SECRET=" + testApprovalsSecret,
		"MAX_PARKED=250",
	}})
	got := []any{
		c.Upstreams[0].URL, c.Upstreams[0].Timeout.Std(), c.Upstreams[0].TargetArgs,
		c.Identity.Anonymous, c.Policy.Dir, c.Policy.Watching(), c.Pending.MaxResultBytes.Int64(),
		c.Limits.MaxParked,
	}
	want := []any{
		"http://127.0.0.1:9001", 90 * time.Second,
		[]string{"path", "url"},
		true, filepath.Join(filepath.Dir(path), "rel/policy"), false, int64(2 << 20),
		250,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLoad_RelativePaths(t *testing.T) {
	root := t.TempDir()
	confDir := filepath.Join(root, "etc", "toolgate")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(confDir, "toolgate.yaml")
	content := `
upstreams:
  - name: notes
    url: http://127.0.0.1:9001
identity:
  jwt:
    jwks_file: keys/jwks.json
    issuer: https://idp.example.com
    audience: [toolgate]
policy:
  dir: ./policy
  rules_file: /abs/rules.yaml
approvals:
  secret: ${SECRET}
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		env   []string
		flags map[string]any
		want  []string // policy.dir, policy.rules_file, identity.jwt.jwks_file
	}{
		{
			name: "from the file: relative to the file's directory; absolute unchanged",
			want: []string{filepath.Join(confDir, "policy"), "/abs/rules.yaml", filepath.Join(confDir, "keys", "jwks.json")},
		},
		{
			name: "from the environment: relative to the working directory",
			env:  []string{"TOOLGATE_POLICY_DIR=./envpolicy", "TOOLGATE_IDENTITY_JWT_JWKS_FILE=jwks.json"},
			want: []string{"./envpolicy", "/abs/rules.yaml", "jwks.json"},
		},
		{
			name:  "from a flag: relative to the working directory",
			flags: map[string]any{"policy.rules_file": "rules.yaml"},
			want:  []string{filepath.Join(confDir, "policy"), "rules.yaml", filepath.Join(confDir, "keys", "jwks.json")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A relative --config is relative to the working directory.
			t.Chdir(root)
			rel, err := filepath.Rel(root, path)
			if err != nil {
				t.Fatal(err)
			}
			c := mustLoad(t, Source{File: rel, Environ: withEnv(tt.env...), Flags: tt.flags})
			got := []string{c.Policy.Dir, c.Policy.RulesFile, c.Identity.JWT.JWKSFile}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoad_FileErrors(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		env      []string
		wantKeys []string
		wantMsgs []string // each must appear in the joined error text
	}{
		{
			name:     "unknown nested key with a suggestion",
			file:     minimalYAML + "pending:\n  redis_ur: redis://x\n",
			wantKeys: []string{"pending.redis_ur"},
			wantMsgs: []string{"pending.redis_ur: unknown key (did you mean pending.redis_url?)"},
		},
		{
			name: "unknown key in a list entry",
			file: strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n",
				"    url: http://127.0.0.1:9001\n  - nme: other\n    url: http://127.0.0.1:9002\n", 1),
			wantKeys: []string{"upstreams[1].nme"},
			wantMsgs: []string{"upstreams[1].nme: unknown key (did you mean upstreams[1].name?)"},
		},
		{
			name:     "misplaced key",
			file:     minimalYAML + "hold: 25s\n",
			wantKeys: []string{"hold"},
			wantMsgs: []string{"hold: unknown key (did you mean pending.hold?)"},
		},
		{
			name:     "unknown key with no near miss",
			file:     minimalYAML + "limits:\n  zzz: 1\n",
			wantKeys: []string{"limits.zzz"},
			wantMsgs: []string{"limits.zzz: unknown key (remove it; the keys allowed under limits are max_body_bytes, max_body_bytes_total, body_timeout, max_parked_per_subject, max_parked, max_parks_per_minute, max_held_per_subject, max_forwards_per_subject, max_hook_requests, max_connections, max_connections_per_source, lossy_numbers)"},
		},
		{
			name:     "several problems are reported together",
			file:     minimalYAML + "log:\n  levle: debug\n  arguments: yes\nshutdown_grace: soon\n",
			wantKeys: []string{"log.arguments", "log.levle", "shutdown_grace"},
		},
		{
			name:     "unset variable names key and variable",
			file:     strings.Replace(minimalYAML, "${SECRET}", "${TOOLGATE_APPROVALS_SECRET}", 1),
			wantKeys: []string{"approvals.secret"},
			wantMsgs: []string{"approvals.secret: environment variable TOOLGATE_APPROVALS_SECRET is not set"},
		},
		{
			name:     "bad reference",
			file:     minimalYAML + "log:\n  level: ${oops\n",
			wantKeys: []string{"log.level"},
		},
		{
			name:     "upstreams is not a list",
			file:     strings.Replace(minimalYAML, "upstreams:\n  - name: notes\n    url: http://127.0.0.1:9001\n", "upstreams: 5\n", 1),
			wantKeys: []string{"upstreams"},
			wantMsgs: []string{"upstreams: expected a list, got a number"},
		},
		{
			name:     "list entry is not a mapping",
			file:     strings.Replace(minimalYAML, "upstreams:\n  - name: notes\n    url: http://127.0.0.1:9001\n", "upstreams: [notes]\n", 1),
			wantKeys: []string{"upstreams[0]"},
		},
		{
			name:     "mapping is not a mapping",
			file:     minimalYAML + "listen: 127.0.0.1:8080\n",
			wantKeys: []string{"listen"},
			wantMsgs: []string{"listen: expected a mapping, got a string"},
		},
		{
			name:     "string key given a number",
			file:     strings.Replace(minimalYAML, "name: notes", "name: 42", 1),
			wantKeys: []string{"upstreams[0].name"},
			wantMsgs: []string{"upstreams[0].name: expected a string, got a number"},
		},
		{
			name:     "bool given a quoted string",
			file:     minimalYAML + "identity:\n  anonymous: \"true\"\n",
			wantKeys: []string{"identity.anonymous"},
		},
		{
			name:     "duration given words",
			file:     minimalYAML + "pending:\n  hold: 25 seconds\n",
			wantKeys: []string{"pending.hold"},
			wantMsgs: []string{`pending.hold: invalid duration "25 seconds"`},
		},
		{
			name:     "duration given true",
			file:     minimalYAML + "pending:\n  ttl: true\n",
			wantKeys: []string{"pending.ttl"},
		},
		{
			name:     "size with an ambiguous unit",
			file:     minimalYAML + "limits:\n  max_body_bytes: 1M\n",
			wantKeys: []string{"limits.max_body_bytes"},
		},
		{
			name:     "list of strings given a string",
			file:     strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n", "    url: http://127.0.0.1:9001\n    target_args: path\n", 1),
			wantKeys: []string{"upstreams[0].target_args"},
		},
		{
			name:     "list of strings with a number in it",
			file:     strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n", "    url: http://127.0.0.1:9001\n    target_args: [path, 7]\n", 1),
			wantKeys: []string{"upstreams[0].target_args[1]"},
		},
		{
			name:     "unset variable in a list of strings",
			file:     strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n", "    url: http://127.0.0.1:9001\n    target_args: [path, \"${NOPE}\"]\n", 1),
			wantKeys: []string{"upstreams[0].target_args[1]"},
			wantMsgs: []string{"upstreams[0].target_args[1]: environment variable NOPE is not set"},
		},
		{
			name:     "secret given a mapping",
			file:     strings.Replace(minimalYAML, "secret: ${SECRET}", "secret: {a: b}", 1),
			wantKeys: []string{"approvals.secret"},
		},
		{
			name:     "dotted key is not a path",
			file:     minimalYAML + "log.level: debug\n",
			wantKeys: []string{"log.level"},
		},
		{
			name:     "integer given a quoted number",
			file:     minimalYAML + "limits:\n  max_parked: \"100\"\n",
			wantKeys: []string{"limits.max_parked"},
			wantMsgs: []string{"limits.max_parked: expected a whole number, got a string (write a whole number such as 100, without quotes)"},
		},
		{
			name:     "integer given a fraction",
			file:     minimalYAML + "limits:\n  max_parked_per_subject: 2.5\n",
			wantKeys: []string{"limits.max_parked_per_subject"},
			wantMsgs: []string{"limits.max_parked_per_subject: expected a whole number, got a number"},
		},
		{
			name:     "integer given a list",
			file:     minimalYAML + "limits:\n  max_parked: [1]\n",
			wantKeys: []string{"limits.max_parked"},
		},
		{
			name:     "integer too large",
			file:     minimalYAML + "limits:\n  max_parked: 1e40\n",
			wantKeys: []string{"limits.max_parked"},
		},
		{
			name:     "integer from an unparsable reference",
			file:     minimalYAML + "limits:\n  max_parked: ${N}\n",
			env:      []string{"N=many"},
			wantKeys: []string{"limits.max_parked"},
			wantMsgs: []string{"limits.max_parked: expected a whole number"},
		},
		{
			name:     "integer refused by validation after decoding",
			file:     minimalYAML + "limits:\n  max_parked: -3\n",
			wantKeys: []string{"limits.max_parked"},
			wantMsgs: []string{"limits.max_parked: -3 is less than 1"},
		},
		{
			name:     "misspelt integer key",
			file:     minimalYAML + "limits:\n  max_parkd: 10\n",
			wantKeys: []string{"limits.max_parkd"},
			wantMsgs: []string{"limits.max_parkd: unknown key (did you mean limits.max_parked?)"},
		},
		{
			name:     "misspelt per-subject key",
			file:     minimalYAML + "limits:\n  max_parked_per_subjet: 10\n",
			wantKeys: []string{"limits.max_parked_per_subjet"},
			wantMsgs: []string{"did you mean limits.max_parked_per_subject?"},
		},
		{
			name:     "misplaced body_timeout",
			file:     minimalYAML + "body_timeout: 5s\n",
			wantKeys: []string{"body_timeout"},
			wantMsgs: []string{"body_timeout: unknown key (did you mean limits.body_timeout?)"},
		},
		{
			name:     "misplaced capabilities",
			file:     minimalYAML + "capabilities: [http.send]\n",
			wantKeys: []string{"capabilities"},
			wantMsgs: []string{"capabilities: unknown key (did you mean policy.capabilities?)"},
		},
		{
			name:     "misspelt capabilities",
			file:     strings.Replace(minimalYAML, "  dir: /srv/policy\n", "  dir: /srv/policy\n  capabilites: [http.send]\n", 1),
			wantKeys: []string{"policy.capabilites"},
			wantMsgs: []string{"did you mean policy.capabilities?"},
		},
		{
			name: "misspelt upstream keys",
			file: strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n",
				"    url: http://127.0.0.1:9001\n    strip_header: [X-A]\n    toolquery: true\n    target_folding: windows\n", 1),
			wantKeys: []string{"upstreams[0].strip_header", "upstreams[0].target_folding", "upstreams[0].toolquery"},
			wantMsgs: []string{
				"did you mean upstreams[0].strip_headers?", "did you mean upstreams[0].tool_query?", "did you mean upstreams[0].target_fold?",
			},
		},
		{
			name:     "lossy_numbers given a bool",
			file:     minimalYAML + "limits:\n  lossy_numbers: true\n",
			wantKeys: []string{"limits.lossy_numbers"},
		},
		{
			name:     "tool_query given a string",
			file:     strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n", "    url: http://127.0.0.1:9001\n    tool_query: \"yes\"\n", 1),
			wantKeys: []string{"upstreams[0].tool_query"},
		},
		{
			name:     "strip_headers given a string",
			file:     strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n", "    url: http://127.0.0.1:9001\n    strip_headers: X-A\n", 1),
			wantKeys: []string{"upstreams[0].strip_headers"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := loadErr(t, Source{File: writeConfig(t, tt.file), Environ: withEnv(tt.env...)})
			if diff := cmp.Diff(tt.wantKeys, errorKeys(err)); diff != "" {
				t.Errorf("error keys (-want +got):\n%s\nerror: %v", diff, err)
			}
			for _, m := range tt.wantMsgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
			for _, fe := range fieldErrors(err) {
				if fe.Fix == "" {
					t.Errorf("%v: no fix", fe)
				}
			}
		})
	}
}

func TestLoad_EnvErrors(t *testing.T) {
	tests := []struct {
		name     string
		env      []string
		wantKeys []string
		wantMsgs []string
	}{
		{
			name:     "misspelt variable",
			env:      []string{"TOOLGATE_PENDING_REDIS_UR=redis://x"},
			wantKeys: []string{"TOOLGATE_PENDING_REDIS_UR"},
			wantMsgs: []string{"TOOLGATE_PENDING_REDIS_UR: environment variable matches no configuration key (did you mean TOOLGATE_PENDING_REDIS_URL?)"},
		},
		{
			name:     "variable with no near miss",
			env:      []string{"TOOLGATE_FROBNICATE=1"},
			wantKeys: []string{"TOOLGATE_FROBNICATE"},
		},
		{
			name:     "misspelt list entry key",
			env:      []string{"TOOLGATE_UPSTREAMS_0_UR=http://x"},
			wantKeys: []string{"TOOLGATE_UPSTREAMS_0_UR"},
			wantMsgs: []string{"did you mean TOOLGATE_UPSTREAMS_0_URL?"},
		},
		{
			name:     "list entry without an index",
			env:      []string{"TOOLGATE_UPSTREAMS_URL=http://x"},
			wantKeys: []string{"TOOLGATE_UPSTREAMS_URL"},
			wantMsgs: []string{"TOOLGATE_UPSTREAMS_<index>_<KEY>"},
		},
		{
			name:     "a whole list",
			env:      []string{"TOOLGATE_UPSTREAMS=notes"},
			wantKeys: []string{"TOOLGATE_UPSTREAMS"},
			wantMsgs: []string{"cannot set upstreams as a whole"},
		},
		{
			name:     "a whole mapping",
			env:      []string{"TOOLGATE_LISTEN=x"},
			wantKeys: []string{"TOOLGATE_LISTEN"},
			wantMsgs: []string{"e.g. TOOLGATE_LISTEN_PROXY"},
		},
		{
			name:     "list entry the file does not have",
			env:      []string{"TOOLGATE_UPSTREAMS_1_URL=http://127.0.0.1:9002"},
			wantKeys: []string{"upstreams[1].url"},
			wantMsgs: []string{"upstreams[1].url: set by TOOLGATE_UPSTREAMS_1_URL, but the file has no upstreams[1] (it lists 1)"},
		},
		{
			name:     "not a bool",
			env:      []string{"TOOLGATE_LOG_ARGUMENTS=maybe"},
			wantKeys: []string{"log.arguments"},
			wantMsgs: []string{"log.arguments: set by TOOLGATE_LOG_ARGUMENTS: expected true or false"},
		},
		{
			name:     "not a duration",
			env:      []string{"TOOLGATE_PENDING_TTL=forever"},
			wantKeys: []string{"pending.ttl"},
		},
		{
			name:     "not a duration in a list entry",
			env:      []string{"TOOLGATE_UPSTREAMS_0_TIMEOUT=later"},
			wantKeys: []string{"upstreams[0].timeout"},
		},
		{
			name:     "not a size",
			env:      []string{"TOOLGATE_LIMITS_MAX_BODY_BYTES=lots"},
			wantKeys: []string{"limits.max_body_bytes"},
		},
		{
			name:     "not a whole number",
			env:      []string{"TOOLGATE_LIMITS_MAX_PARKED=lots"},
			wantKeys: []string{"limits.max_parked"},
			wantMsgs: []string{"limits.max_parked: set by TOOLGATE_LIMITS_MAX_PARKED: expected a whole number (write a whole number such as 100, without quotes)"},
		},
		{
			name:     "a fraction is not a whole number",
			env:      []string{"TOOLGATE_LIMITS_MAX_PARKED_PER_SUBJECT=1.5"},
			wantKeys: []string{"limits.max_parked_per_subject"},
		},
		{
			name:     "misspelt integer variable",
			env:      []string{"TOOLGATE_LIMITS_MAX_PARKD=10"},
			wantKeys: []string{"TOOLGATE_LIMITS_MAX_PARKD"},
			wantMsgs: []string{"did you mean TOOLGATE_LIMITS_MAX_PARKED?"},
		},
		{
			name:     "misspelt upstream variable",
			env:      []string{"TOOLGATE_UPSTREAMS_0_STRIP_HEADER=X-A"},
			wantKeys: []string{"TOOLGATE_UPSTREAMS_0_STRIP_HEADER"},
			wantMsgs: []string{"did you mean TOOLGATE_UPSTREAMS_0_STRIP_HEADERS?"},
		},
		{
			name:     "not a bool in a list entry",
			env:      []string{"TOOLGATE_UPSTREAMS_0_TOOL_QUERY=sometimes"},
			wantKeys: []string{"upstreams[0].tool_query"},
		},
		{
			name:     "refused by validation",
			env:      []string{"TOOLGATE_LIMITS_LOSSY_NUMBERS=round"},
			wantKeys: []string{"limits.lossy_numbers"},
			wantMsgs: []string{`limits.lossy_numbers: "round" is not allowed (use one of refuse or allow)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := loadErr(t, Source{File: writeConfig(t, minimalYAML), Environ: withEnv(tt.env...)})
			if diff := cmp.Diff(tt.wantKeys, errorKeys(err)); diff != "" {
				t.Errorf("error keys (-want +got):\n%s\nerror: %v", diff, err)
			}
			for _, m := range tt.wantMsgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestLoad_EnvNotKeys(t *testing.T) {
	// TOOLGATE_* variables that are no key's name but are not mistakes
	// either must not stop the start.
	path := writeConfig(t, minimalYAML+"identity:\n  api_keys:\n    - key: ${TOOLGATE_AGENT_KEY}\n      subject: agent\n")
	c := mustLoad(t, Source{File: path, Environ: append([]string{
		"TOOLGATE_AGENT_KEY=" + testAgentKey, // read by ${} in the file
		"TOOLGATE_CONFIG=/etc/toolgate/toolgate.yaml",
		"TOOLGATE_SERVICE_HOST=10.0.0.1", // Kubernetes service links
		"TOOLGATE_SERVICE_PORT=8080",
		"TOOLGATE_PORT=tcp://10.0.0.1:8080",
		"TOOLGATE_PORT_8080_TCP_ADDR=10.0.0.1",
		"TOOLGATE_TEST_REDIS_ADDR=127.0.0.1:6379",
	}, minimalEnv...)})
	if got := c.Identity.APIKeys[0].Key.Reveal(); got != testAgentKey {
		t.Errorf("api key = %q, want %q", got, testAgentKey)
	}
}

func TestLoad_Flags(t *testing.T) {
	path := writeConfig(t, minimalYAML)
	t.Run("typed and string values", func(t *testing.T) {
		c := mustLoad(t, Source{File: path, Environ: minimalEnv, Flags: map[string]any{
			"listen.proxy":          "0.0.0.0:9999",
			"log.arguments":         "true",
			"pending.store":         "redis",
			"pending.redis_url":     "rediss://:" + testRedisPassword + "@redis.example.com:6380/0",
			"pending.ttl":           2 * time.Hour,
			"limits.max_body_bytes": ByteSize(2 << 20),
		}})
		got := []any{c.Listen.Proxy, c.Log.Arguments, c.Pending.Store, c.Pending.TTL.Std(), c.Limits.MaxBodyBytes.Int64()}
		want := []any{"0.0.0.0:9999", true, "redis", 2 * time.Hour, int64(2 << 20)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("unknown flag key", func(t *testing.T) {
		err := loadErr(t, Source{File: path, Environ: minimalEnv, Flags: map[string]any{"listen.proxyy": "x", "listen": "x"}})
		if diff := cmp.Diff([]string{"listen", "listen.proxyy"}, errorKeys(err)); diff != "" {
			t.Errorf("error keys (-want +got):\n%s", diff)
		}
	})
	t.Run("wrong flag type", func(t *testing.T) {
		err := loadErr(t, Source{File: path, Environ: minimalEnv, Flags: map[string]any{"log.arguments": 3, "limits.max_parked": true}})
		if diff := cmp.Diff([]string{"limits.max_parked", "log.arguments"}, errorKeys(err)); diff != "" {
			t.Errorf("error keys (-want +got):\n%s", diff)
		}
	})
}

func TestLoad_ValidationRunsAfterDecoding(t *testing.T) {
	// The file decodes; what it says is wrong.
	path := writeConfig(t, strings.Replace(minimalYAML, "url: http://127.0.0.1:9001", "url: ftp://127.0.0.1:9001", 1))
	err := loadErr(t, Source{File: path, Environ: minimalEnv})
	if diff := cmp.Diff([]string{"upstreams[0].url"}, errorKeys(err)); diff != "" {
		t.Errorf("error keys (-want +got):\n%s", diff)
	}
}

func TestLoad_UnreadableFile(t *testing.T) {
	tests := []struct {
		name, content string
	}{
		{"missing", ""},
		{"invalid YAML", "upstreams: [\n"},
		{"duplicate key", "log:\n  level: info\nlog:\n  level: debug\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "missing.yaml")
			if tt.content != "" {
				path = writeConfig(t, tt.content)
			}
			c, err := Load(Source{File: path, Environ: minimalEnv})
			if err == nil || c != nil {
				t.Fatalf("Load = %v, %v; want an error", c, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestLoad_EmptyFileIsOnlyDefaults(t *testing.T) {
	err := loadErr(t, Source{File: writeConfig(t, "# nothing\n")})
	if diff := cmp.Diff([]string{"upstreams", "identity", "policy", "approvals.secret"}, errorKeys(err)); diff != "" {
		t.Errorf("error keys (-want +got):\n%s", diff)
	}
}

// TestLoad_ErrorsHideSecrets puts secrets where they are refused and checks
// that no error repeats them.
func TestLoad_ErrorsHideSecrets(t *testing.T) {
	const s = "s3cr3t-value-that-must-not-leak"
	files := []string{
		strings.Replace(minimalYAML, "secret: ${SECRET}", "secret: [\""+s+"\"]", 1),
		strings.Replace(minimalYAML, "secret: ${SECRET}", "secret: ${"+s+"", 1),
		minimalYAML + "pending:\n  store: redis\n  redis_url: \"ftp://user:" + s + "@h\"\n",
		minimalYAML + "public_url: \"http://user:" + s + "@\"\n",
		minimalYAML + "proxy_public_url: \"http://user:" + s + "@gw.example.com?\"\n",
		minimalYAML + "pending:\n  redis_url: 12345\n  redis_ur: " + s + "\n",
	}
	for i, f := range files {
		err := loadErr(t, Source{File: writeConfig(t, f), Environ: minimalEnv})
		if strings.Contains(err.Error(), s) {
			t.Errorf("file %d: error shows the secret: %v", i, err)
		}
	}
	err := loadErr(t, Source{File: writeConfig(t, minimalYAML), Environ: withEnv("TOOLGATE_APPROVALS_SECRET=" + s[:10])})
	if strings.Contains(err.Error(), s[:10]) {
		t.Errorf("error shows the secret: %v", err)
	}
}

func TestLoad_EmptyTargetArgs(t *testing.T) {
	// target_args: [] means "look at no argument", not "the default list".
	path := writeConfig(t, strings.Replace(minimalYAML, "    url: http://127.0.0.1:9001\n",
		"    url: http://127.0.0.1:9001\n    target_args: []\n", 1))
	c := mustLoad(t, Source{File: path, Environ: minimalEnv})
	if diff := cmp.Diff([]string{}, c.Upstreams[0].TargetArgs); diff != "" {
		t.Errorf("target_args (-want +got):\n%s", diff)
	}
}
