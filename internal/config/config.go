// Package config reads toolgate's YAML configuration file, layers environment
// variables and flags over it, expands ${NAME} references, applies defaults and
// validates the result. It is imported only by cmd/toolgate: every other
// package receives plain values built from a Config, never the Config itself.
package config

import "time"

// Config is the whole configuration file (docs/configuration.md). Field tags
// are the YAML keys; an environment variable TOOLGATE_<KEY_PATH> overrides a
// key, with "_" between levels (TOOLGATE_PENDING_REDIS_URL overrides
// pending.redis_url).
type Config struct {
	Listen         Listen     `koanf:"listen"`
	PublicURL      string     `koanf:"public_url"`
	ProxyPublicURL string     `koanf:"proxy_public_url"` // the proxy listener as agents reach it; base of their status URLs
	Upstreams      []Upstream `koanf:"upstreams"`
	Identity       Identity   `koanf:"identity"`
	Policy         Policy     `koanf:"policy"`
	Hooks          []Hook     `koanf:"hooks"`
	Pending        Pending    `koanf:"pending"`
	Approvals      Approvals  `koanf:"approvals"`
	Limits         Limits     `koanf:"limits"`
	Log            Log        `koanf:"log"`
	ShutdownGrace  Duration   `koanf:"shutdown_grace"`
}

// Listen holds the three listener addresses. They must all differ: agents
// must never reach the approvals or admin endpoints on the proxy port.
type Listen struct {
	Proxy     string `koanf:"proxy"`
	Approvals string `koanf:"approvals"`
	Admin     string `koanf:"admin"`
}

// Upstream is one tool server behind toolgate.
type Upstream struct {
	Name       string   `koanf:"name"`
	URL        string   `koanf:"url"`
	Protocol   string   `koanf:"protocol"` // rest | mcp
	Prefix     string   `koanf:"prefix"`
	MCPPath    string   `koanf:"mcp_path"`
	TargetArgs []string `koanf:"target_args"`
	Timeout    Duration `koanf:"timeout"` // time to the upstream's response headers
	// ToolQuery lets a REST tool call carry a query string; otherwise a
	// tool call with one is refused.
	ToolQuery  bool   `koanf:"tool_query"`
	TargetFold string `koanf:"target_fold"` // none | windows: how tool.target is normalised
	// StripHeaders are request headers that never reach this upstream, in
	// canonical form (ApplyDefaults writes them so).
	StripHeaders []string `koanf:"strip_headers"`
	// Mode, when set, is the permission mode of this upstream's calls in
	// place of policy.mode (a subject's mode and a trusted mode header
	// still come before it).
	Mode string `koanf:"mode"`
	// Enforce false is dry run for this upstream: every call is decided,
	// logged and counted, and forwarded whatever the decision. Unset:
	// policy.enforce.
	Enforce *bool `koanf:"enforce"`
}

// Identity says how callers are identified.
type Identity struct {
	APIKeys   []APIKey `koanf:"api_keys"`
	JWT       *JWT     `koanf:"jwt"`
	Anonymous bool     `koanf:"anonymous"`
	// BrowserOrigins are the web pages' origins that may call without
	// credentials when Anonymous is set (a browser-based MCP client);
	// any other page is refused, so that a site the user visits cannot
	// reach a local toolgate (cross-site requests, DNS rebinding).
	BrowserOrigins []string `koanf:"browser_origins"`
}

// APIKey maps a bearer key to a subject.
type APIKey struct {
	Key     Secret   `koanf:"key"`
	Subject string   `koanf:"subject"`
	Groups  []string `koanf:"groups"`
}

// JWT configures verification of bearer JWTs.
type JWT struct {
	JWKSFile     string   `koanf:"jwks_file"`
	JWKSURL      string   `koanf:"jwks_url"`
	Issuer       string   `koanf:"issuer"`
	Audience     []string `koanf:"audience"`
	SubjectClaim string   `koanf:"subject_claim"`
	// SubjectPrefix is prepended to the subject claim in subject.id, so
	// that a JWT's subject never reads as an API key's.
	SubjectPrefix string   `koanf:"subject_prefix"`
	GroupsClaim   string   `koanf:"groups_claim"`
	Leeway        Duration `koanf:"leeway"`
}

// Policy says where the policies are and how decisions are applied.
type Policy struct {
	Dir       string `koanf:"dir"`
	RulesFile string `koanf:"rules_file"`
	Mode      string `koanf:"mode"`    // default | dont_ask | plan | bypass
	Default   string `koanf:"default"` // deny | ask: what "no rule fired" means
	Watch     *bool  `koanf:"watch"`   // hot reload; default true
	// Capabilities are OPA built-ins a policy may call beyond the safe
	// default set ("http.send"); the policy package checks the names.
	Capabilities []string `koanf:"capabilities"`
	// Enforce false is dry run: every call is decided, logged and counted,
	// and forwarded whatever the decision. Default true.
	Enforce *bool `koanf:"enforce"`
	// SubjectModes are permission modes by subject ID, in place of the
	// upstream's and policy.mode.
	SubjectModes map[string]string `koanf:"subject_modes"`
	// ModeHeader, when set, lets the listed subjects choose a call's mode
	// with a request header.
	ModeHeader *ModeHeader `koanf:"mode_header"`
}

// Hook is one PreToolUse hook: an HTTP endpoint asked about the tool
// calls its matcher selects, before the policy.
type Hook struct {
	Name      string    `koanf:"name"`
	URL       string    `koanf:"url"`
	Match     HookMatch `koanf:"match"`
	Timeout   Duration  `koanf:"timeout"`    // default 2s, at most 30s
	OnFailure string    `koanf:"on_failure"` // deny (default) | ask | allow
	Secret    Secret    `koanf:"secret"`     // Standard Webhooks signature of the request
}

// HookMatch selects the calls a hook is asked about: globs on the
// upstream's name and the tool's ("*" or empty: all).
type HookMatch struct {
	Upstream string `koanf:"upstream"`
	Tool     string `koanf:"tool"`
}

// ModeHeader is policy.mode_header: the request header that sets a call's
// permission mode, believed only from TrustedSubjects.
type ModeHeader struct {
	Name            string   `koanf:"name"`
	TrustedSubjects []string `koanf:"trusted_subjects"`
}

// Pending configures where parked (ask) calls wait.
type Pending struct {
	Store       string `koanf:"store"` // memory | redis
	RedisURL    Secret `koanf:"redis_url"`
	RedisPrefix string `koanf:"redis_prefix"` // key prefix; replicas of one toolgate share it
	// RedisMinReplicas, when positive, confirms every park, decision and
	// claim with WAIT on that many Redis replicas (pending.Options.MinReplicas),
	// waiting at most RedisReplicaTimeout.
	RedisMinReplicas    int      `koanf:"redis_min_replicas"`
	RedisReplicaTimeout Duration `koanf:"redis_replica_timeout"`
	// RedisShards spreads parked calls over that many hash tags
	// (pending.Options.Shards); 0: 16 on a Redis Cluster, else 1.
	RedisShards    int      `koanf:"redis_shards"`
	Hold           Duration `koanf:"hold"`
	TTL            Duration `koanf:"ttl"`
	ResultTTL      Duration `koanf:"result_ttl"`
	MaxResultBytes ByteSize `koanf:"max_result_bytes"`
	// FailReadiness makes /readyz answer 503 while the store cannot be
	// reached, so that an orchestrator sends no calls to a replica whose
	// asks would all be refused; off, the store is only reported.
	FailReadiness bool `koanf:"fail_readiness"`
}

// Approvals configures the approval links, the approvers and notifications.
type Approvals struct {
	Secret Secret `koanf:"secret"`
	// PreviousSecrets are secrets that signed links before Secret: links,
	// confirmation links and forms they signed still verify (until their
	// call expires), so the secret can rotate without breaking them.
	PreviousSecrets []Secret   `koanf:"previous_secrets"`
	Approvers       []Approver `koanf:"approvers"`
	Notify          []Notify   `koanf:"notify"`
	// Identity says how approvers are known on the approvals listener;
	// nil: only by link token and API key.
	Identity *ApprovalsIdentity `koanf:"identity"`
	Slack    *Slack             `koanf:"slack"`
	// RequesterSignIn makes confirmation pages need the requester signed
	// in through Identity, as an approver named as the call's subject.
	RequesterSignIn bool `koanf:"requester_sign_in"`
}

// Approver is an approver toolgate knows by name. With a key, the key
// authenticates the approvals API as Name; without one, the entry gives no
// API access and only names the groups of an approver known otherwise
// (approvals.identity, a Slack user mapped to Name).
type Approver struct {
	Name   string   `koanf:"name"`
	Key    Secret   `koanf:"key"`
	Groups []string `koanf:"groups"`
}

// ApprovalsIdentity is approvals.identity: who an approver on the approvals
// listener is. Type selects the keys that apply; the other type's keys
// must not be set.
type ApprovalsIdentity struct {
	Type string `koanf:"type"` // trusted_header | oidc

	// trusted_header: headers set by an authenticating proxy in front,
	// believed with the proxy's secret or from a trusted source.
	UserHeader     string   `koanf:"user_header"`
	GroupsHeader   string   `koanf:"groups_header"`
	SecretHeader   string   `koanf:"secret_header"`
	Secret         Secret   `koanf:"secret"`
	TrustedSources []string `koanf:"trusted_sources"`

	// oidc: toolgate signs approvers in itself.
	Issuer        string   `koanf:"issuer"`
	ClientID      string   `koanf:"client_id"`
	ClientSecret  Secret   `koanf:"client_secret"`
	RedirectURL   string   `koanf:"redirect_url"`
	GroupsClaim   string   `koanf:"groups_claim"`
	UserClaim     string   `koanf:"user_claim"`
	Scopes        []string `koanf:"scopes"`
	CookieSecret  Secret   `koanf:"cookie_secret"`
	SessionTTL    Duration `koanf:"session_ttl"`
	AllowedGroups []string `koanf:"allowed_groups"`
	// ProviderLogout: sign-out also ends the session at the identity
	// provider when it advertises an end_session_endpoint; default true.
	ProviderLogout *bool `koanf:"provider_logout"`
}

// Slack is approvals.slack: Slack interactivity (the buttons of format:
// slack messages).
type Slack struct {
	SigningSecret Secret `koanf:"signing_secret"`
	// Users maps Slack user IDs (U012ABC) to approver names: the
	// identity a click decides as.
	Users map[string]string `koanf:"users"`
}

// Notify is one destination announced of every parked call.
type Notify struct {
	URL    string `koanf:"url"`
	Format string `koanf:"format"` // cloudevents | slack | teams
	Secret Secret `koanf:"secret"`
	// Concurrency is how many deliveries to this entry run at once; each
	// call's events still arrive in order. 1 sends every event in order.
	Concurrency int `koanf:"concurrency"`
}

// Limits bounds what a caller may send and how many calls may wait.
type Limits struct {
	MaxBodyBytes ByteSize `koanf:"max_body_bytes"`
	// MaxBodyBytesTotal bounds the body bytes the proxy reads at once,
	// over all requests; a body that would pass it is 503.
	MaxBodyBytesTotal ByteSize `koanf:"max_body_bytes_total"`
	BodyTimeout       Duration `koanf:"body_timeout"` // the whole body must arrive within this, else 408
	// MaxParkedPerSubject bounds the waiting and approved calls of one
	// principal; MaxParked the same across all principals, per store.
	MaxParkedPerSubject int `koanf:"max_parked_per_subject"`
	MaxParked           int `koanf:"max_parked"`
	// MaxParksPerMinute bounds how often one principal parks new calls:
	// that many at once, then one every minute/N (0: no limit). Every new
	// call is announced to the approvers; the caps above bound how many
	// calls a principal holds, this how often it can reach them.
	MaxParksPerMinute int `koanf:"max_parks_per_minute"`
	// MaxHeldPerSubject bounds how many of one principal's requests a
	// replica holds open at once (asks and status long-polls); past it a
	// request is answered at once, as with "Prefer: respond-async".
	MaxHeldPerSubject int `koanf:"max_held_per_subject"`
	// MaxForwardsPerSubject bounds how many of one principal's allowed
	// calls a replica forwards at once (each holds a connection to its
	// upstream until its answer is passed on); past it a call is 429.
	MaxForwardsPerSubject int `koanf:"max_forwards_per_subject"`
	// MaxHookRequests bounds the hook requests a replica has in flight at
	// once, over all calls; one principal's share is a quarter of it.
	// A call whose hooks find no room is denied.
	MaxHookRequests int `koanf:"max_hook_requests"`
	// MaxConnections bounds the connections each listener holds open at
	// once, idle keep-alive ones and those still sending their headers
	// included; past it, new connections wait until one closes.
	MaxConnections int `koanf:"max_connections"`
	// MaxConnectionsPerSource bounds the connections one source (an IP
	// address) holds open on the proxy listener; past it a new connection
	// is closed as soon as it is accepted. 0: no such cap (the default:
	// behind a load balancer every caller is one source).
	MaxConnectionsPerSource int    `koanf:"max_connections_per_source"`
	LossyNumbers            string `koanf:"lossy_numbers"` // refuse | allow: JSON numbers a float64 changes
}

// Log configures logging.
type Log struct {
	Level string `koanf:"level"` // debug | info | warn | error
	// Arguments keeps tool arguments (and plain HTTP calls' query strings)
	// in decision-log events, masked by the policy's data.system.log.mask
	// rules; false removes them.
	Arguments bool      `koanf:"arguments"`
	Decisions Decisions `koanf:"decisions"`
}

// Decisions configures the decision log: one event per decided call and one
// per approval decision, in OPA's decision-log shape, written by OPA's
// decision-log plugin to the console and/or an OPA-compatible log service.
type Decisions struct {
	Console      *bool           `koanf:"console"`       // events on stderr; default true
	MaskDecision string          `koanf:"mask_decision"` // data path of the mask rules
	DropDecision string          `koanf:"drop_decision"` // data path of the drop rule
	Service      DecisionService `koanf:"service"`
}

// DecisionService is an OPA-compatible decision-log service; events are
// POSTed to it as gzip JSON arrays when URL is set.
type DecisionService struct {
	URL         string   `koanf:"url"`
	Resource    string   `koanf:"resource"` // path under url, default /logs
	Token       Secret   `koanf:"token"`    // bearer token
	Timeout     Duration `koanf:"timeout"`  // wait for the response headers
	BufferBytes ByteSize `koanf:"buffer_bytes"`
	MinDelay    Duration `koanf:"min_delay"` // pause between uploads, at least
	MaxDelay    Duration `koanf:"max_delay"` // and at most (also the retry backoff's cap)
}

// ConsoleOn reports whether decision events go to stderr; unset means on.
func (d Decisions) ConsoleOn() bool { return d.Console == nil || *d.Console }

// Duration is a time.Duration written as "25s", "1h".
type Duration time.Duration

// ByteSize is a size written as "1MiB", "512KiB", "64kB" or a plain number of bytes.
type ByteSize int64

// Secret is a string that never prints: String, MarshalText and LogValue
// return "[redacted]" when it is set.
type Secret string
