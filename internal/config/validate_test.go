package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/policy"
)

// validConfig returns a configuration that passes Validate and uses every
// section, so that each test row breaks exactly one rule.
func validConfig() Config {
	c := Config{
		Upstreams: []Upstream{
			{Name: "notes", URL: "http://127.0.0.1:9001"},
			{Name: "fs-mcp", URL: "https://tools.example.com", Protocol: "mcp", Prefix: "/fs/"},
		},
		Identity: Identity{
			APIKeys: []APIKey{
				{Key: testAgentKey, Subject: "agent-42", Groups: []string{"agents"}},
				{Key: "other-agent-key-0123", Subject: "agent-43"},
			},
			JWT: &JWT{JWKSURL: "https://idp.example.com/jwks", Issuer: "https://idp.example.com", Audience: []string{"toolgate"}},
		},
		Policy: Policy{Dir: "/srv/policy"},
		Pending: Pending{
			Store:    "redis",
			RedisURL: Secret("redis://:" + testRedisPassword + "@127.0.0.1:6379/0"),
		},
		Approvals: Approvals{
			Secret: testApprovalsSecret,
			Approvers: []Approver{
				{Name: "alice", Key: testAliceKey},
				{Name: "bob", Key: "bob-key-0123456789"},
			},
			Notify: []Notify{{URL: "https://hooks.example.com/toolgate", Secret: testWebhookSecret}},
		},
	}
	c.ApplyDefaults()
	return c
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*Config)
		wantKeys []string
	}{
		{"valid", func(*Config) {}, nil},

		{"no upstream", func(c *Config) { c.Upstreams = nil }, []string{"upstreams"}},
		{"upstream name empty", func(c *Config) { c.Upstreams[0].Name = "" }, []string{"upstreams[0].name"}},
		{"upstream url with credentials", func(c *Config) { c.Upstreams[0].URL = "http://tool:pw@127.0.0.1:9000" }, []string{"upstreams[0].url"}},
		{"upstream name upper case", func(c *Config) { c.Upstreams[0].Name = "Notes" }, []string{"upstreams[0].name"}},
		{"upstream name starts with -", func(c *Config) { c.Upstreams[0].Name = "-notes" }, []string{"upstreams[0].name"}},
		{"upstream name too long", func(c *Config) { c.Upstreams[0].Name = strings.Repeat("a", 64) }, []string{"upstreams[0].name"}},
		{"upstream name of 63 is fine", func(c *Config) { c.Upstreams[0].Name = strings.Repeat("a", 63) }, nil},
		{"upstream name taken", func(c *Config) { c.Upstreams[1].Name = "notes" }, []string{"upstreams[1].name"}},
		{"upstream url empty", func(c *Config) { c.Upstreams[0].URL = "" }, []string{"upstreams[0].url"}},
		{"upstream url not http", func(c *Config) { c.Upstreams[0].URL = "ftp://127.0.0.1" }, []string{"upstreams[0].url"}},
		{"upstream url relative", func(c *Config) { c.Upstreams[0].URL = "/notes" }, []string{"upstreams[0].url"}},
		{"upstream url without host", func(c *Config) { c.Upstreams[0].URL = "http://" }, []string{"upstreams[0].url"}},
		{"upstream url unparsable", func(c *Config) { c.Upstreams[0].URL = "127.0.0.1:9001" }, []string{"upstreams[0].url"}},
		{"upstream protocol", func(c *Config) { c.Upstreams[0].Protocol = "grpc" }, []string{"upstreams[0].protocol"}},
		{"upstream prefix without leading /", func(c *Config) { c.Upstreams[1].Prefix = "fs/" }, []string{"upstreams[1].prefix"}},
		{"upstream prefix without trailing /", func(c *Config) { c.Upstreams[1].Prefix = "/fs" }, []string{"upstreams[1].prefix"}},
		{"upstream prefix taken", func(c *Config) { c.Upstreams[1].Prefix = "/" }, []string{"upstreams[1].prefix"}},
		{"upstream mcp_path", func(c *Config) { c.Upstreams[1].MCPPath = "mcp" }, []string{"upstreams[1].mcp_path"}},
		{"upstream timeout", func(c *Config) { c.Upstreams[0].Timeout = -1 }, []string{"upstreams[0].timeout"}},
		{"upstream target_fold", func(c *Config) { c.Upstreams[0].TargetFold = "macos" }, []string{"upstreams[0].target_fold"}},
		{"upstream target_fold windows", func(c *Config) { c.Upstreams[1].TargetFold = "windows" }, nil},
		{"upstream tool_query", func(c *Config) { c.Upstreams[0].ToolQuery = true }, nil},
		{"upstream strip_headers", func(c *Config) {
			c.Upstreams[0].StripHeaders = []string{"X-Internal-User", "X_Odd.Name!~"}
		}, nil},
		{"upstream strip_headers empty name", func(c *Config) {
			c.Upstreams[0].StripHeaders = []string{"X-Internal-User", ""}
		}, []string{"upstreams[0].strip_headers[1]"}},
		{"upstream strip_headers with a space", func(c *Config) { c.Upstreams[1].StripHeaders = []string{"X Internal"} }, []string{"upstreams[1].strip_headers[0]"}},
		{"upstream strip_headers with a colon", func(c *Config) { c.Upstreams[0].StripHeaders = []string{"X-User:"} }, []string{"upstreams[0].strip_headers[0]"}},
		{"upstream strip_headers not ASCII", func(c *Config) { c.Upstreams[0].StripHeaders = []string{"X-Üser"} }, []string{"upstreams[0].strip_headers[0]"}},

		{"listen proxy not host:port", func(c *Config) { c.Listen.Proxy = "8080" }, []string{"listen.proxy"}},
		{"listen approvals port out of range", func(c *Config) { c.Listen.Approvals = "127.0.0.1:70000" }, []string{"listen.approvals"}},
		{"listen admin named port", func(c *Config) { c.Listen.Admin = "127.0.0.1:http" }, []string{"listen.admin"}},
		{"listen admin same as approvals", func(c *Config) { c.Listen.Admin = c.Listen.Approvals }, []string{"listen.admin"}},
		{"listen admin on every interface, approvals' port", func(c *Config) { c.Listen.Admin = ":8081" }, []string{"listen.admin"}},
		{"listen approvals and admin same port, other hosts", func(c *Config) { c.Listen.Admin = "10.0.0.1:8081" }, nil},
		{"listen proxy port on another host", func(c *Config) { c.Listen.Approvals = "10.0.0.1:8080" }, []string{"listen.approvals"}},
		{"listen proxy port for admin", func(c *Config) { c.Listen.Admin = "[::1]:8080" }, []string{"listen.admin"}},
		{"listen port 0 may repeat", func(c *Config) {
			c.Listen = Listen{Proxy: "127.0.0.1:0", Approvals: "127.0.0.1:0", Admin: "127.0.0.1:0"}
		}, nil},
		{"public_url not absolute", func(c *Config) { c.PublicURL = "toolgate.example.com" }, []string{"public_url"}},
		{"public_url not http", func(c *Config) { c.PublicURL = "ws://toolgate.example.com" }, []string{"public_url"}},
		{"public_url empty", func(c *Config) { c.PublicURL = "" }, []string{"public_url"}},
		{"public_url with credentials", func(c *Config) { c.PublicURL = "https://alice:pw@toolgate.example.com" }, []string{"public_url"}},
		{"public_url with a user", func(c *Config) { c.PublicURL = "https://alice@toolgate.example.com" }, []string{"public_url"}},
		{"public_url with a query", func(c *Config) { c.PublicURL = "https://toolgate.example.com/?team=a" }, []string{"public_url"}},
		{"public_url with a fragment", func(c *Config) { c.PublicURL = "https://toolgate.example.com/#x" }, []string{"public_url"}},
		{"proxy_public_url", func(c *Config) { c.ProxyPublicURL = "https://gw.example.com" }, nil},
		{"proxy_public_url with a path prefix", func(c *Config) { c.ProxyPublicURL = "https://gw.example.com/tg/" }, nil},
		{"proxy_public_url with a port", func(c *Config) { c.ProxyPublicURL = "http://10.0.0.1:8080" }, nil},
		{"proxy_public_url relative", func(c *Config) { c.ProxyPublicURL = "/tg" }, []string{"proxy_public_url"}},
		{"proxy_public_url without scheme", func(c *Config) { c.ProxyPublicURL = "gw.example.com" }, []string{"proxy_public_url"}},
		{"proxy_public_url not http", func(c *Config) { c.ProxyPublicURL = "ftp://gw.example.com" }, []string{"proxy_public_url"}},
		{"proxy_public_url without host", func(c *Config) { c.ProxyPublicURL = "https:///tg" }, []string{"proxy_public_url"}},
		{"proxy_public_url with a query", func(c *Config) { c.ProxyPublicURL = "https://gw.example.com/tg?x=1" }, []string{"proxy_public_url"}},
		{"proxy_public_url with an empty query", func(c *Config) { c.ProxyPublicURL = "https://gw.example.com/?" }, []string{"proxy_public_url"}},
		{"proxy_public_url with a fragment", func(c *Config) { c.ProxyPublicURL = "https://gw.example.com/#top" }, []string{"proxy_public_url"}},
		{"proxy_public_url with an empty fragment", func(c *Config) { c.ProxyPublicURL = "https://gw.example.com/#" }, []string{"proxy_public_url"}},
		{"proxy_public_url with credentials", func(c *Config) { c.ProxyPublicURL = "https://agent:pw@gw.example.com" }, []string{"proxy_public_url"}},

		{"api key empty", func(c *Config) { c.Identity.APIKeys[0].Key = "" }, []string{"identity.api_keys[0].key"}},
		{"api key subject empty", func(c *Config) { c.Identity.APIKeys[0].Subject = "" }, []string{"identity.api_keys[0].subject"}},
		{"api key repeated", func(c *Config) { c.Identity.APIKeys[1].Key = testAgentKey }, []string{"identity.api_keys[1].key"}},
		{"api key with a trailing newline", func(c *Config) { c.Identity.APIKeys[0].Key += "\n" }, []string{"identity.api_keys[0].key"}},
		{"api key subject reserved", func(c *Config) { c.Identity.APIKeys[0].Subject = "anonymous" }, []string{"identity.api_keys[0].subject"}},
		{"api key group empty", func(c *Config) { c.Identity.APIKeys[0].Groups = []string{""} }, []string{"identity.api_keys[0].groups[0]"}},
		{"jwt without keys", func(c *Config) { c.Identity.JWT.JWKSURL = "" }, []string{"identity.jwt.jwks_file"}},
		{"jwt with both key sources", func(c *Config) { c.Identity.JWT.JWKSFile = "/etc/jwks.json" }, []string{"identity.jwt.jwks_url"}},
		{"jwt jwks_file alone is fine", func(c *Config) { c.Identity.JWT.JWKSURL, c.Identity.JWT.JWKSFile = "", "jwks.json" }, nil},
		{"jwt jwks_url not http", func(c *Config) { c.Identity.JWT.JWKSURL = "file:///etc/jwks.json" }, []string{"identity.jwt.jwks_url"}},
		{"jwt jwks_url in clear text", func(c *Config) { c.Identity.JWT.JWKSURL = "http://idp.example.com/jwks" }, []string{"identity.jwt.jwks_url"}},
		{"jwt audience entry empty", func(c *Config) { c.Identity.JWT.Audience = []string{"toolgate", ""} }, []string{"identity.jwt.audience[1]"}},
		{"jwt issuer empty", func(c *Config) { c.Identity.JWT.Issuer = "" }, []string{"identity.jwt.issuer"}},
		{"jwt audience empty", func(c *Config) { c.Identity.JWT.Audience = nil }, []string{"identity.jwt.audience"}},
		{"jwt leeway negative", func(c *Config) { c.Identity.JWT.Leeway = -1 }, []string{"identity.jwt.leeway"}},
		// A bare 86400 reads as seconds: a day of expired tokens taken.
		{"jwt leeway of a day", func(c *Config) { c.Identity.JWT.Leeway = Duration(24 * time.Hour) }, []string{"identity.jwt.leeway"}},
		{"jwt leeway of 5m is fine", func(c *Config) { c.Identity.JWT.Leeway = Duration(5 * time.Minute) }, nil},
		{"no way to identify callers", func(c *Config) { c.Identity = Identity{} }, []string{"identity"}},
		{"anonymous alone is fine", func(c *Config) {
			c.Identity = Identity{Anonymous: true}
			c.Approvals.Approvers = nil
		}, nil},

		{"no policy", func(c *Config) { c.Policy.Dir = "" }, []string{"policy"}},
		{"rules_file alone is fine", func(c *Config) { c.Policy.Dir, c.Policy.RulesFile = "", "rules.yaml" }, nil},
		{"policy mode", func(c *Config) { c.Policy.Mode = "yolo" }, []string{"policy.mode"}},
		{"subject mode of an API key's subject", func(c *Config) {
			c.Identity.JWT = nil
			c.Policy.SubjectModes = map[string]string{"agent-42": "plan"}
		}, nil},
		// ci_bot for ci-bot: the agent meant would run in the default mode.
		{"subject mode of no caller's subject", func(c *Config) {
			c.Identity.JWT = nil
			c.Policy.SubjectModes = map[string]string{"agent_42": "plan"}
		}, []string{"policy.subject_modes.agent_42"}},
		{"subject mode of a JWT's subject", func(c *Config) { c.Policy.SubjectModes = map[string]string{"ci-bot": "plan"} }, nil},
		{"subject mode outside the JWT's subject_prefix", func(c *Config) {
			c.Identity.JWT.SubjectPrefix = "jwt:"
			c.Policy.SubjectModes = map[string]string{"ci-bot": "plan", "jwt:ci-bot": "plan"}
		}, []string{"policy.subject_modes.ci-bot"}},
		{"subject mode of the anonymous caller", func(c *Config) {
			c.Identity.JWT, c.Identity.Anonymous = nil, true
			c.Policy.SubjectModes = map[string]string{"anonymous": "plan"}
		}, nil},
		{"subject mode of the anonymous caller, anonymous off", func(c *Config) {
			c.Identity.JWT = nil
			c.Policy.SubjectModes = map[string]string{"anonymous": "plan"}
		}, []string{"policy.subject_modes.anonymous"}},
		{"mode header trusting no caller's subject", func(c *Config) {
			c.Identity.JWT = nil
			c.Policy.ModeHeader = &ModeHeader{Name: "X-Toolgate-Mode", TrustedSubjects: []string{"agent-43", "agent-44"}}
		}, []string{"policy.mode_header.trusted_subjects[1]"}},
		{"hook on every upstream", func(c *Config) {
			c.Hooks = []Hook{{Name: "freeze", URL: "http://127.0.0.1:9500/hook", Match: HookMatch{Upstream: "*"}}}
		}, nil},
		{"hook on upstreams a glob matches", func(c *Config) {
			c.Hooks = []Hook{{Name: "freeze", URL: "http://127.0.0.1:9500/hook", Match: HookMatch{Upstream: "fs-*"}}}
		}, nil},
		// note for notes: the hook would never run.
		{"hook on no upstream", func(c *Config) {
			c.Hooks = []Hook{{Name: "freeze", URL: "http://127.0.0.1:9500/hook", Match: HookMatch{Upstream: "note"}}}
		}, []string{"hooks[0].match.upstream"}},
		{"hook upstream not a glob", func(c *Config) {
			c.Hooks = []Hook{{Name: "freeze", URL: "http://127.0.0.1:9500/hook", Match: HookMatch{Upstream: "notes[a"}}}
		}, []string{"hooks[0].match.upstream"}},
		{"policy default", func(c *Config) { c.Policy.Default = "allow" }, []string{"policy.default"}},
		{"policy capabilities", func(c *Config) { c.Policy.Capabilities = []string{"http.send", "net.lookup_ip_addr"} }, nil},
		{"policy capability empty", func(c *Config) { c.Policy.Capabilities = []string{"http.send", ""} }, []string{"policy.capabilities[1]"}},
		{"policy capability with a space", func(c *Config) { c.Policy.Capabilities = []string{"http.send, opa.runtime"} }, []string{"policy.capabilities[0]"}},

		{"pending store", func(c *Config) { c.Pending.Store = "etcd" }, []string{"pending.store"}},
		{"redis without url", func(c *Config) { c.Pending.RedisURL = "" }, []string{"pending.redis_url"}},
		{"redis url with another scheme", func(c *Config) { c.Pending.RedisURL = "http://127.0.0.1:6379" }, []string{"pending.redis_url"}},
		{"redis url without host", func(c *Config) { c.Pending.RedisURL = "redis:///0" }, []string{"pending.redis_url"}},
		{"redis url unparsable", func(c *Config) { c.Pending.RedisURL = "redis://h:port/0" }, []string{"pending.redis_url"}},
		{"redis unix socket without path", func(c *Config) { c.Pending.RedisURL = "unix://localhost" }, []string{"pending.redis_url"}},
		{"redis unix socket", func(c *Config) { c.Pending.RedisURL = "unix:///run/redis.sock" }, nil},
		{"rediss", func(c *Config) { c.Pending.RedisURL = "rediss://redis.example.com:6380/0" }, nil},
		{"redis+sentinel with several hosts", func(c *Config) { c.Pending.RedisURL = "redis+sentinel://h1:26379,h2:26379/mymaster" }, nil},
		{"redis-sentinel", func(c *Config) { c.Pending.RedisURL = "redis-sentinel://h1:26379/mymaster" }, nil},
		{"memory store ignores redis_url", func(c *Config) { c.Pending.Store, c.Pending.RedisURL = "memory", "" }, nil},
		{"hold not positive", func(c *Config) { c.Pending.Hold = -1 }, []string{"pending.hold"}},
		{"hold longer than ttl", func(c *Config) { c.Pending.Hold = Duration(2 * time.Hour) }, []string{"pending.hold"}},
		{"hold equal to ttl is fine", func(c *Config) { c.Pending.Hold = c.Pending.TTL }, nil},
		{"ttl not positive", func(c *Config) { c.Pending.TTL = -1 }, []string{"pending.ttl"}},
		{"result_ttl not positive", func(c *Config) { c.Pending.ResultTTL = -1 }, []string{"pending.result_ttl"}},
		{"max_result_bytes not positive", func(c *Config) { c.Pending.MaxResultBytes = -1 }, []string{"pending.max_result_bytes"}},

		{"approvals secret missing", func(c *Config) { c.Approvals.Secret = "" }, []string{"approvals.secret"}},
		{"approvals secret short", func(c *Config) { c.Approvals.Secret = Secret(strings.Repeat("x", 31)) }, []string{"approvals.secret"}},
		{"approvals secret of 32 bytes is fine", func(c *Config) { c.Approvals.Secret = Secret(strings.Repeat("x", 32)) }, nil},
		{"approver name empty", func(c *Config) { c.Approvals.Approvers[0].Name = "" }, []string{"approvals.approvers[0].name"}},
		// "José" decomposed: signed in composed, the same person would count twice.
		{"approver name not composed", func(c *Config) { c.Approvals.Approvers[0].Name = "jose\u0301" }, []string{"approvals.approvers[0].name"}},
		{"approver name repeated", func(c *Config) { c.Approvals.Approvers[1].Name = "alice" }, []string{"approvals.approvers[1].name"}},
		{"approver key empty", func(c *Config) { c.Approvals.Approvers[0].Key = "" }, []string{"approvals.approvers[0].key"}},
		{"approver key repeated", func(c *Config) { c.Approvals.Approvers[1].Key = testAliceKey }, []string{"approvals.approvers[1].key"}},
		{"approver key is an agent's key", func(c *Config) { c.Approvals.Approvers[1].Key = "other-agent-key-0123" }, []string{"approvals.approvers[1].key"}},
		{"notify url", func(c *Config) { c.Approvals.Notify[0].URL = "hooks.example.com" }, []string{"approvals.notify[0].url"}},
		{"notify format", func(c *Config) { c.Approvals.Notify[0].Format = "email" }, []string{"approvals.notify[0].format"}},
		{"notify concurrency", func(c *Config) { c.Approvals.Notify[0].Concurrency = 65 }, []string{"approvals.notify[0].concurrency"}},

		{"max_body_bytes too small", func(c *Config) { c.Limits.MaxBodyBytes = 1023 }, []string{"limits.max_body_bytes"}},
		{"max_body_bytes too large", func(c *Config) { c.Limits.MaxBodyBytes, c.Limits.MaxBodyBytesTotal = 1<<30+1, 1<<30+1 }, []string{"limits.max_body_bytes"}},
		{"max_body_bytes bounds are inclusive", func(c *Config) { c.Limits.MaxBodyBytes, c.Limits.MaxBodyBytesTotal = 1<<30, 1<<30 }, nil},
		{"body_timeout negative", func(c *Config) { c.Limits.BodyTimeout = -1 }, []string{"limits.body_timeout"}},
		{"body_timeout zero", func(c *Config) { c.Limits.BodyTimeout = 0 }, []string{"limits.body_timeout"}},
		{"max_parked_per_subject zero", func(c *Config) { c.Limits.MaxParkedPerSubject = 0 }, []string{"limits.max_parked_per_subject"}},
		{"max_parked_per_subject negative", func(c *Config) { c.Limits.MaxParkedPerSubject = -5 }, []string{"limits.max_parked_per_subject"}},
		{"max_parked_per_subject of 1 is fine", func(c *Config) { c.Limits.MaxParkedPerSubject = 1 }, nil},
		{"max_parked zero", func(c *Config) { c.Limits.MaxParked = 0 }, []string{"limits.max_parked"}},
		{"max_parked under max_parked_per_subject", func(c *Config) { c.Limits.MaxParked = 99 }, []string{"limits.max_parked"}},
		{"max_parked equal to max_parked_per_subject is fine", func(c *Config) { c.Limits.MaxParked = 100 }, nil},
		{"max_parked and max_parked_per_subject both 1", func(c *Config) { c.Limits.MaxParked, c.Limits.MaxParkedPerSubject = 1, 1 }, nil},
		{"both parked limits below 1, one error each", func(c *Config) { c.Limits.MaxParked, c.Limits.MaxParkedPerSubject = -1, -1 }, []string{
			"limits.max_parked_per_subject", "limits.max_parked",
		}},
		{"max_parks_per_minute negative", func(c *Config) { c.Limits.MaxParksPerMinute = -1 }, []string{"limits.max_parks_per_minute"}},
		{"max_parks_per_minute above a hundred a second", func(c *Config) { c.Limits.MaxParksPerMinute = 6001 }, []string{"limits.max_parks_per_minute"}},
		{"max_body_bytes_total below max_body_bytes", func(c *Config) { c.Limits.MaxBodyBytesTotal = c.Limits.MaxBodyBytes - 1 }, []string{"limits.max_body_bytes_total"}},
		{"max_connections too few to hold calls", func(c *Config) { c.Limits.MaxConnections = 15 }, []string{"limits.max_connections"}},
		{"max_connections above a million", func(c *Config) { c.Limits.MaxConnections = 1000001 }, []string{"limits.max_connections"}},
		{"max_connections_per_source negative", func(c *Config) { c.Limits.MaxConnectionsPerSource = -1 }, []string{"limits.max_connections_per_source"}},
		{"max_connections_per_source above max_connections", func(c *Config) { c.Limits.MaxConnectionsPerSource = c.Limits.MaxConnections + 1 }, []string{"limits.max_connections_per_source"}},
		{"max_forwards_per_subject zero", func(c *Config) { c.Limits.MaxForwardsPerSubject = 0 }, []string{"limits.max_forwards_per_subject"}},
		{"max_forwards_per_subject above a million", func(c *Config) { c.Limits.MaxForwardsPerSubject = 1000001 }, []string{"limits.max_forwards_per_subject"}},
		{"max_hook_requests zero", func(c *Config) { c.Limits.MaxHookRequests = 0 }, []string{"limits.max_hook_requests"}},
		{"max_hook_requests above 65536", func(c *Config) { c.Limits.MaxHookRequests = 65537 }, []string{"limits.max_hook_requests"}},
		{"lossy_numbers", func(c *Config) { c.Limits.LossyNumbers = "round" }, []string{"limits.lossy_numbers"}},
		{"browser_origins without anonymous", func(c *Config) {
			c.Identity.Anonymous = false
			c.Identity.BrowserOrigins = []string{"http://localhost:6274"}
		}, []string{"identity.browser_origins"}},
		{"previous secret short", func(c *Config) { c.Approvals.PreviousSecrets = []Secret{"short"} }, []string{"approvals.previous_secrets[0]"}},
		{"previous secret is the secret", func(c *Config) { c.Approvals.PreviousSecrets = []Secret{c.Approvals.Secret} }, []string{"approvals.previous_secrets[0]"}},
		{"five previous secrets", func(c *Config) {
			for i := range 5 {
				c.Approvals.PreviousSecrets = append(c.Approvals.PreviousSecrets, Secret(strings.Repeat(string(rune('a'+i)), 32)))
			}
		}, []string{"approvals.previous_secrets"}},
		{"lossy_numbers allow", func(c *Config) { c.Limits.LossyNumbers = "allow" }, nil},
		{"log level", func(c *Config) { c.Log.Level = "trace" }, []string{"log.level"}},
		{"shutdown_grace negative", func(c *Config) { c.ShutdownGrace = -1 }, []string{"shutdown_grace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			if diff := cmp.Diff(tt.wantKeys, errorKeys(err)); diff != "" {
				t.Fatalf("error keys (-want +got):\n%s\nerror: %v", diff, err)
			}
			for _, fe := range fieldErrors(err) {
				if fe.Msg == "" || fe.Fix == "" {
					t.Errorf("%q: want both a message and a fix", fe)
				}
				for _, s := range secretsOf(&c) {
					if strings.Contains(fe.Error(), s) {
						t.Errorf("%q shows a secret", fe)
					}
				}
			}
		})
	}
}

func TestValidate_Messages(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{
			"secret", func(c *Config) { c.Approvals.Secret = "" },
			"approvals.secret: is not set (generate one with: openssl rand -base64 48)",
		},
		{
			"identity", func(c *Config) { c.Identity = Identity{} },
			"identity: every call would be refused with 401 (add identity.api_keys or identity.jwt, or set identity.anonymous: true)",
		},
		{
			"duplicate upstream name", func(c *Config) { c.Upstreams[1].Name = "notes" },
			`upstreams[1].name: "notes" is also the name of upstreams[0] (give every upstream its own name)`,
		},
		{
			"listen clash", func(c *Config) { c.Listen.Admin = "127.0.0.1:8080" },
			"listen.admin: uses port 8080, as listen.proxy does (give every listener its own port; agents must never reach approvals or admin on the proxy's port)",
		},
		{
			"agent key as approver key", func(c *Config) { c.Approvals.Approvers[0].Key = testAgentKey },
			"approvals.approvers[0].key: is the same key as identity.api_keys[0].key (an agent must never be able to approve its own calls; give the approver a different key)",
		},
		{
			"jwks over http", func(c *Config) { c.Identity.JWT.JWKSURL = "http://idp.example.com/jwks" },
			"identity.jwt.jwks_url: must be an https:// URL (write it like https://idp.example.com/.well-known/jwks.json)",
		},
		{
			"enumeration", func(c *Config) { c.Policy.Mode = "yolo" },
			`policy.mode: "yolo" is not allowed (use one of default, dont_ask, plan or bypass)`,
		},
		{
			"lossy_numbers", func(c *Config) { c.Limits.LossyNumbers = "Allow" },
			`limits.lossy_numbers: "Allow" is not allowed (use one of refuse or allow)`,
		},
		{
			"target_fold", func(c *Config) { c.Upstreams[1].TargetFold = "win32" },
			`upstreams[1].target_fold: "win32" is not allowed (use one of none or windows)`,
		},
		{
			"max_parked_per_subject", func(c *Config) { c.Limits.MaxParkedPerSubject = 0 },
			"limits.max_parked_per_subject: 0 is less than 1 (write a whole number such as 100)",
		},
		{
			"max_parked under max_parked_per_subject", func(c *Config) { c.Limits.MaxParked = 50 },
			"limits.max_parked: 50 is less than limits.max_parked_per_subject (100) (one principal may park at most as many calls as all together; raise limits.max_parked or lower limits.max_parked_per_subject)",
		},
		{
			"body_timeout", func(c *Config) { c.Limits.BodyTimeout = Duration(-time.Second) },
			"limits.body_timeout: must be positive (write a duration such as 10s)",
		},
		{
			"strip_headers", func(c *Config) { c.Upstreams[0].StripHeaders = []string{"X-Tenant Id"} },
			`upstreams[0].strip_headers[0]: "X-Tenant Id" is not a header field name (write a name such as X-Internal-User: letters, digits and !#$%&'*+-.^_` + "`" + `|~, no spaces or colon)`,
		},
		{
			"capabilities", func(c *Config) { c.Policy.Capabilities = []string{""} },
			`policy.capabilities[0]: "" is not a built-in's name (write the name of an OPA built-in such as http.send, without spaces)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate() = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// secretsOf returns the values of every Secret set in c.
func secretsOf(c *Config) []string {
	var out []string
	add := func(s Secret) {
		if s != "" {
			out = append(out, s.Reveal())
		}
	}
	for _, k := range c.Identity.APIKeys {
		add(k.Key)
	}
	add(c.Pending.RedisURL)
	add(c.Approvals.Secret)
	for _, a := range c.Approvals.Approvers {
		add(a.Key)
	}
	for _, n := range c.Approvals.Notify {
		add(n.Secret)
	}
	return out
}

func TestDefault(t *testing.T) {
	got := Default()
	want := Config{
		Listen:    Listen{Proxy: "127.0.0.1:8080", Approvals: "127.0.0.1:8081", Admin: "127.0.0.1:9090"},
		PublicURL: "http://127.0.0.1:8081",
		Policy:    Policy{Mode: "default", Default: "deny", Watch: new(true), Enforce: new(true)},
		Pending: Pending{
			Store:          "memory",
			Hold:           Duration(25 * time.Second),
			TTL:            Duration(time.Hour),
			ResultTTL:      Duration(24 * time.Hour),
			MaxResultBytes: 1 << 20,
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
		t.Errorf("Default() (-want +got):\n%s", diff)
	}
}

func TestApplyDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Config
		get  func(*Config) any
		want any
	}{
		{
			"public_url follows listen.approvals",
			Config{Listen: Listen{Approvals: "10.1.2.3:8443"}},
			func(c *Config) any { return c.PublicURL }, "http://10.1.2.3:8443",
		},
		{
			"public_url for every interface is localhost",
			Config{Listen: Listen{Approvals: ":8081"}},
			func(c *Config) any { return c.PublicURL }, "http://localhost:8081",
		},
		{
			"public_url for IPv6 every interface",
			Config{Listen: Listen{Approvals: "[::]:8081"}},
			func(c *Config) any { return c.PublicURL }, "http://localhost:8081",
		},
		{
			"public_url kept",
			Config{PublicURL: "https://x.example.com"},
			func(c *Config) any { return c.PublicURL }, "https://x.example.com",
		},
		{
			"upstream defaults",
			Config{Upstreams: []Upstream{{Name: "a"}}},
			func(c *Config) any { return c.Upstreams[0] },
			Upstream{Name: "a", Protocol: "rest", Prefix: "/", MCPPath: "/mcp", TargetArgs: DefaultTargetArgs, Timeout: Duration(time.Minute), TargetFold: "none"},
		},
		{
			"upstream target_fold kept",
			Config{Upstreams: []Upstream{{TargetFold: "windows"}}},
			func(c *Config) any { return c.Upstreams[0].TargetFold }, "windows",
		},
		{
			"strip_headers in canonical form; invalid names unchanged",
			Config{Upstreams: []Upstream{{StripHeaders: []string{"x-internal-user", "X-FORWARDED-USER", "Already-Canonical", "bad name"}}}},
			func(c *Config) any { return c.Upstreams[0].StripHeaders },
			[]string{"X-Internal-User", "X-Forwarded-User", "Already-Canonical", "bad name"},
		},
		{
			"no strip_headers, no capabilities by default",
			Config{Upstreams: []Upstream{{}}},
			func(c *Config) any { return [2]int{len(c.Upstreams[0].StripHeaders), len(c.Policy.Capabilities)} },
			[2]int{},
		},
		{
			"limits defaults",
			Config{},
			func(c *Config) any { return c.Limits },
			Limits{MaxBodyBytes: 1 << 20, MaxBodyBytesTotal: 64 << 20, BodyTimeout: Duration(10 * time.Second), MaxParkedPerSubject: 100, MaxParked: 10000, MaxHeldPerSubject: 100, MaxForwardsPerSubject: 1000, MaxHookRequests: 256, MaxConnections: 10000, LossyNumbers: "refuse"},
		},
		{
			"limits kept",
			Config{Limits: Limits{BodyTimeout: Duration(time.Second), MaxParkedPerSubject: 3, MaxParked: 7, LossyNumbers: "allow"}},
			func(c *Config) any { return c.Limits },
			Limits{MaxBodyBytes: 1 << 20, MaxBodyBytesTotal: 64 << 20, BodyTimeout: Duration(time.Second), MaxParkedPerSubject: 3, MaxParked: 7, MaxHeldPerSubject: 100, MaxForwardsPerSubject: 1000, MaxHookRequests: 256, MaxConnections: 10000, LossyNumbers: "allow"},
		},
		{
			"empty target_args stay empty",
			Config{Upstreams: []Upstream{{TargetArgs: []string{}}}},
			func(c *Config) any { return len(c.Upstreams[0].TargetArgs) }, 0,
		},
		{
			"jwt defaults",
			Config{Identity: Identity{JWT: &JWT{}}},
			func(c *Config) any { return *c.Identity.JWT },
			JWT{SubjectClaim: "sub", GroupsClaim: "groups", Leeway: Duration(30 * time.Second)},
		},
		{
			"no jwt stays no jwt",
			Config{},
			func(c *Config) any { return c.Identity.JWT == nil }, true,
		},
		{
			"watch false kept",
			Config{Policy: Policy{Watch: new(false)}},
			func(c *Config) any { return c.Policy.Watching() }, false,
		},
		{
			"notify format",
			Config{Approvals: Approvals{Notify: []Notify{{}, {Format: "slack"}}}},
			func(c *Config) any { return []string{c.Approvals.Notify[0].Format, c.Approvals.Notify[1].Format} },
			[]string{"cloudevents", "slack"},
		},
		{
			"notify concurrency",
			Config{Approvals: Approvals{Notify: []Notify{{}, {Concurrency: 1}}}},
			func(c *Config) any {
				return []int{c.Approvals.Notify[0].Concurrency, c.Approvals.Notify[1].Concurrency}
			},
			[]int{4, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.in
			c.ApplyDefaults()
			if diff := cmp.Diff(tt.want, tt.get(&c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			again := c
			again.ApplyDefaults()
			if diff := cmp.Diff(c, again); diff != "" {
				t.Errorf("ApplyDefaults twice differs (-once +twice):\n%s", diff)
			}
		})
	}

	t.Run("upstreams get their own target_args", func(t *testing.T) {
		c := Config{Upstreams: []Upstream{{}, {}}}
		c.ApplyDefaults()
		c.Upstreams[0].TargetArgs[0] = "changed"
		if c.Upstreams[1].TargetArgs[0] != "path" || DefaultTargetArgs[0] != "path" {
			t.Error("target_args share one backing array")
		}
	})
}

// TestTargetFoldsAgree: the values Validate accepts for target_fold are the
// ones the policy package folds by, and a value it refuses, the policy
// package refuses too.
func TestTargetFoldsAgree(t *testing.T) {
	for _, fold := range []string{"none", "windows", "macos", "Windows", "windows "} {
		c := validConfig()
		c.Upstreams[0].TargetFold = fold
		configOK := c.Validate() == nil
		_, err := policy.ParseFold(fold)
		if policyOK := err == nil; configOK != policyOK {
			t.Errorf("target_fold %q: config accepts %v, policy.ParseFold accepts %v", fold, configOK, policyOK)
		}
	}
}
