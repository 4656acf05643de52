package config

import (
	"net"
	"net/textproto"
	"slices"
	"time"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// DefaultTargetArgs are the tool argument names an upstream looks in, in
// order, for the call's target when target_args is not set: the policy's.
var DefaultTargetArgs = policy.DefaultTargetArgs

// Default returns the configuration with every default applied and nothing
// else set. The defaults are:
//
//	listen.proxy               127.0.0.1:8080
//	listen.approvals           127.0.0.1:8081
//	listen.admin               127.0.0.1:9090
//	public_url                 "http://" + listen.approvals ("localhost" for an empty or wildcard host)
//	upstreams[].protocol       rest
//	upstreams[].prefix         /
//	upstreams[].mcp_path       /mcp
//	upstreams[].target_args    DefaultTargetArgs (only when absent; [] means none)
//	upstreams[].timeout        60s
//	upstreams[].tool_query     false
//	upstreams[].target_fold    none
//	upstreams[].strip_headers  [] (names are written in canonical form: x-user-id is X-User-Id)
//	identity.jwt.subject_claim sub     (when identity.jwt is set)
//	identity.jwt.groups_claim  groups
//	identity.jwt.leeway        30s
//	identity.anonymous         false
//	hooks[].match.upstream     *
//	hooks[].match.tool         *
//	hooks[].timeout            2s
//	hooks[].on_failure         deny
//	policy.mode                default
//	policy.default             deny
//	policy.watch               true
//	policy.enforce             true
//	policy.capabilities        [] (the safe default set of built-ins only)
//	pending.store              memory
//	pending.hold               25s
//	pending.ttl                1h
//	pending.result_ttl         24h
//	pending.max_result_bytes   1MiB
//	pending.redis_prefix       toolgate:  (store redis)
//	pending.redis_replica_timeout  1s     (store redis)
//	approvals.notify[].format  cloudevents
//	approvals.notify[].concurrency  4
//	approvals.identity.secret_header  X-Approvals-Proxy-Secret (type trusted_header, with secret set)
//	approvals.identity.user_claim     email   (type oidc)
//	approvals.identity.groups_claim   groups  (type oidc)
//	approvals.identity.scopes         [openid, email, profile] (type oidc)
//	approvals.identity.session_ttl    8h      (type oidc)
//	approvals.identity.provider_logout true   (type oidc)
//	approvals.identity.redirect_url   public_url + /auth/callback (type oidc; derived by signin, not written here)
//	limits.max_body_bytes      1MiB
//	limits.max_body_bytes_total 64MiB (at least limits.max_body_bytes)
//	limits.body_timeout        10s
//	limits.max_parked_per_subject 100
//	limits.max_parked          10000
//	limits.max_parks_per_minute 0 (no limit)
//	limits.max_held_per_subject 100
//	limits.max_forwards_per_subject 1000
//	limits.max_hook_requests   256
//	limits.max_connections     10000
//	limits.lossy_numbers       refuse
//	log.level                  info
//	log.arguments              false
//	log.decisions.console      true
//	log.decisions.mask_decision        /system/log/mask
//	log.decisions.drop_decision        /system/log/drop
//	log.decisions.service.resource     /logs
//	log.decisions.service.timeout      10s
//	log.decisions.service.buffer_bytes 16MiB
//	log.decisions.service.min_delay    5s
//	log.decisions.service.max_delay    30s
//	shutdown_grace             20s
//
// There are no default upstreams, policy, identities or approvals secret;
// Validate reports them missing.
func Default() Config {
	var c Config
	c.ApplyDefaults()
	return c
}

// ApplyDefaults sets every empty (zero) field that has a default to that
// default, and leaves set fields alone, so it may be called more than once.
// A zero value therefore cannot be configured where a default exists: a
// zero timeout, grace period or limit means "the default", not "none". It
// also writes upstreams[].strip_headers in canonical form.
func (c *Config) ApplyDefaults() {
	setString(&c.Listen.Proxy, "127.0.0.1:8080")
	setString(&c.Listen.Approvals, "127.0.0.1:8081")
	setString(&c.Listen.Admin, "127.0.0.1:9090")
	if c.PublicURL == "" {
		c.PublicURL = publicURLFor(c.Listen.Approvals)
	}

	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		setString(&u.Protocol, "rest")
		setString(&u.Prefix, "/")
		setString(&u.MCPPath, "/mcp")
		if u.TargetArgs == nil {
			u.TargetArgs = slices.Clone(DefaultTargetArgs)
		}
		setDuration(&u.Timeout, 60*time.Second)
		setString(&u.TargetFold, "none")
		for j, h := range u.StripHeaders {
			// An invalid name comes back unchanged, for Validate to report.
			u.StripHeaders[j] = textproto.CanonicalMIMEHeaderKey(h)
		}
	}

	if j := c.Identity.JWT; j != nil {
		setString(&j.SubjectClaim, "sub")
		setString(&j.GroupsClaim, "groups")
		setDuration(&j.Leeway, 30*time.Second)
	}

	for i := range c.Hooks {
		h := &c.Hooks[i]
		setString(&h.Match.Upstream, "*")
		setString(&h.Match.Tool, "*")
		setDuration(&h.Timeout, 2*time.Second)
		setString(&h.OnFailure, "deny")
	}

	setString(&c.Policy.Mode, "default")
	setString(&c.Policy.Default, "deny")
	if c.Policy.Watch == nil {
		watch := true
		c.Policy.Watch = &watch
	}
	if c.Policy.Enforce == nil {
		enforce := true
		c.Policy.Enforce = &enforce
	}

	setString(&c.Pending.Store, "memory")
	setDuration(&c.Pending.Hold, 25*time.Second)
	setDuration(&c.Pending.TTL, time.Hour)
	setDuration(&c.Pending.ResultTTL, 24*time.Hour)
	setSize(&c.Pending.MaxResultBytes, 1<<20)
	if c.Pending.Store == "redis" {
		// The store's own defaults, written out so that config validate
		// prints the values in force. redis_shards stays 0: it is chosen
		// when Redis answers (16 on a Cluster, else 1).
		setString(&c.Pending.RedisPrefix, pending.DefaultPrefix)
		setDuration(&c.Pending.RedisReplicaTimeout, pending.DefaultReplicaTimeout)
	}

	for i := range c.Approvals.Notify {
		setString(&c.Approvals.Notify[i].Format, "cloudevents")
		setInt(&c.Approvals.Notify[i].Concurrency, 4)
	}
	if id := c.Approvals.Identity; id != nil {
		id.applyDefaults()
	}

	setSize(&c.Limits.MaxBodyBytes, 1<<20)
	// 64 bodies of the default size; never less than one of the largest.
	setSize(&c.Limits.MaxBodyBytesTotal, max(64<<20, c.Limits.MaxBodyBytes))
	setDuration(&c.Limits.BodyTimeout, 10*time.Second)
	setInt(&c.Limits.MaxParkedPerSubject, 100)
	setInt(&c.Limits.MaxParked, 10000)
	setInt(&c.Limits.MaxHeldPerSubject, 100)
	setInt(&c.Limits.MaxForwardsPerSubject, 1000)
	setInt(&c.Limits.MaxHookRequests, 256) // hooks.DefaultMaxInFlight
	setInt(&c.Limits.MaxConnections, 10000)
	setString(&c.Limits.LossyNumbers, "refuse")
	setString(&c.Log.Level, "info")
	d := &c.Log.Decisions
	if d.Console == nil {
		console := true
		d.Console = &console
	}
	setString(&d.MaskDecision, "/system/log/mask")
	setString(&d.DropDecision, "/system/log/drop")
	setString(&d.Service.Resource, "/logs")
	setDuration(&d.Service.Timeout, 10*time.Second)
	setSize(&d.Service.BufferBytes, 16<<20)
	setDuration(&d.Service.MinDelay, 5*time.Second)
	setDuration(&d.Service.MaxDelay, 30*time.Second)
	setDuration(&c.ShutdownGrace, 20*time.Second)
}

// PublicURLAwaitsPort reports whether public_url is the default made of
// listen.approvals on port 0 (a free port, as tests and some platforms ask
// for): it names the port the listener takes, known once it is bound
// (ApprovalsBound). The default made of port 0 itself reaches nothing.
func (c *Config) PublicURLAwaitsPort() bool {
	_, port, err := net.SplitHostPort(c.Listen.Approvals)
	return err == nil && port == "0" && c.PublicURL == publicURLFor(c.Listen.Approvals)
}

// ApprovalsBound records addr, where the approvals listener was bound:
// when public_url awaits its port (PublicURLAwaitsPort), the approval
// links name it.
func (c *Config) ApprovalsBound(addr string) {
	if c.PublicURLAwaitsPort() {
		c.PublicURL = publicURLFor(addr)
	}
}

// publicURLFor is the approvals listener as a URL. A listener on all
// interfaces (":8081", "0.0.0.0:8081") has no address a link could use, so
// the link points at localhost; set public_url for anything else. An
// address that does not parse is left for Validate to report.
func publicURLFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Enforcing reports whether calls to upstream u are enforced (not dry
// run): u's enforce when set, else policy.enforce, else true.
func (c *Config) Enforcing(u Upstream) bool {
	switch {
	case u.Enforce != nil:
		return *u.Enforce
	case c.Policy.Enforce != nil:
		return *c.Policy.Enforce
	}
	return true
}

// Watching reports whether policy.watch is on; unset means on.
func (p Policy) Watching() bool { return p.Watch == nil || *p.Watch }

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setDuration(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}

func setSize(p *ByteSize, v ByteSize) {
	if *p == 0 {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}
