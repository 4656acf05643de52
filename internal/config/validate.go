package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gobwas/glob"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/text/unicode/norm"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/webhooksig"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
)

// FieldError is one problem with one key. Key is the key path as written in
// the file ("upstreams[1].url", "approvals.secret") or, for a variable that
// matches no key, the variable's name. Msg says what is wrong and Fix what
// to do; neither ever contains a secret value.
type FieldError struct {
	Key, Msg, Fix string

	unset string // a ${NAME} whose variable is unset: NAME
}

// Error returns "<key>: <msg> (<fix>)".
func (e *FieldError) Error() string {
	if e.Fix == "" {
		return e.Key + ": " + e.Msg
	}
	return e.Key + ": " + e.Msg + " (" + e.Fix + ")"
}

// MinKeyBytes is the shortest bearer key (identity.api_keys,
// approvals.approvers) and the shortest signing secret (hooks, approvals.notify,
// approvals.slack) toolgate starts with: anything shorter could be guessed
// or searched for. Slack's own signing secrets are 32 hexadecimal characters.
const MinKeyBytes = 16

// keyFix is how to make a bearer key long enough.
const keyFix = "generate one with: openssl rand -hex 32"

// keyLength refuses val, the (expanded) value of key, when it is shorter
// than MinKeyBytes. It never quotes the value.
func (v *validator) keyLength(key, val, fix string) {
	if len(val) < MinKeyBytes {
		v.add(key, fmt.Sprintf("is shorter than %d bytes", MinKeyBytes), fix)
	}
}

// webhookSecret checks val, the value of key: unset (requests go
// unsigned), or a Standard Webhooks secret ("whsec_" + base64, or the raw
// bytes) whose key is at least MinKeyBytes long. who says who verifies.
func (v *validator) webhookSecret(key, val, who string) {
	if val == "" {
		return
	}
	k, err := webhooksig.ParseSecret(val)
	switch {
	case err != nil:
		v.add(key, strings.TrimPrefix(err.Error(), "secret: "), "write whsec_ and the base64 of the key, or the key itself; "+who)
	case len(k) < MinKeyBytes && strings.HasPrefix(val, webhooksig.SecretPrefix):
		v.add(key, fmt.Sprintf("holds a key shorter than %d bytes after whsec_", MinKeyBytes), "generate one with: echo whsec_$(openssl rand -base64 32); "+who)
	case len(k) < MinKeyBytes:
		v.add(key, fmt.Sprintf("is shorter than %d bytes", MinKeyBytes), "generate one with: openssl rand -base64 32; "+who)
	}
}

// notTokenChar reports the characters a bearer key cannot hold:
// whitespace and control characters (as identity refuses in agent keys).
func notTokenChar(r rune) bool { return r <= ' ' || r == 0x7f }

var upstreamName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Validate checks c, which should have had ApplyDefaults applied, and
// returns every problem found as an *FieldError joined with errors.Join, or
// nil. It does not touch the network or the file system: whether the policy
// directory exists, or Redis answers, is for the packages that use them.
func (c *Config) Validate() error {
	var v validator
	v.listen(c)
	v.upstreams(c.Upstreams)
	v.hooks(c.Hooks, c.Upstreams)
	v.identity(&c.Identity)
	v.policy(&c.Policy, &c.Identity)
	v.pending(&c.Pending)
	v.approvals(&c.Approvals, c.Identity.APIKeys, c.PublicURL)
	v.limitsAndLog(c)
	v.agentKeysApart(c)
	return errors.Join(v.errs...)
}

// agentKeysApart refuses a secret of toolgate's that is also an agent's API
// key. The link secret (now or previous), the approver proxy's secret and
// the session key, Slack's signing secret and the OIDC client secret each
// let whoever holds them approve calls; the webhook and hook secrets and
// the decision-log token let them speak as toolgate. A chart or a .env that
// names one variable twice makes such a config, and it loads: an agent
// holding its own key would hold the approval too. (Approvers' keys are
// checked where they are read.)
func (v *validator) agentKeysApart(c *Config) {
	agents := map[string]string{}
	for i, k := range c.Identity.APIKeys {
		// A key refused already (too short) is not compared too.
		if len(k.Key) >= MinKeyBytes {
			agents[k.Key.Reveal()] = fmt.Sprintf("identity.api_keys[%d].key", i)
		}
	}
	if len(agents) == 0 {
		return
	}
	check := func(key string, s Secret) {
		if at := agents[s.Reveal()]; s != "" && at != "" {
			v.add(key, "is the same secret as "+at, "an agent must never hold what approves its calls or speaks as toolgate; give each its own secret")
		}
	}
	a := &c.Approvals
	check("approvals.secret", a.Secret)
	for i, s := range a.PreviousSecrets {
		check(fmt.Sprintf("approvals.previous_secrets[%d]", i), s)
	}
	if id := a.Identity; id != nil {
		check("approvals.identity.secret", id.Secret)
		check("approvals.identity.client_secret", id.ClientSecret)
		check("approvals.identity.cookie_secret", id.CookieSecret)
	}
	if a.Slack != nil {
		check("approvals.slack.signing_secret", a.Slack.SigningSecret)
	}
	for i, n := range a.Notify {
		check(fmt.Sprintf("approvals.notify[%d].secret", i), n.Secret)
	}
	for i, h := range c.Hooks {
		check(fmt.Sprintf("hooks[%d].secret", i), h.Secret)
	}
	check("log.decisions.service.token", c.Log.Decisions.Service.Token)
}

type validator struct{ errs []error }

func (v *validator) add(key, msg, fix string) {
	v.errs = append(v.errs, &FieldError{Key: key, Msg: msg, Fix: fix})
}

// oneOf checks that val, the value of key, is one of allowed.
func (v *validator) oneOf(key, val string, allowed ...string) {
	if slices.Contains(allowed, val) {
		return
	}
	v.add(key, fmt.Sprintf("%q is not allowed", val), "use one of "+joinOr(allowed))
}

// httpURL checks that val, the value of key, is an absolute http or https
// URL with a host. The URL is never quoted: it may carry credentials.
func (v *validator) httpURL(key, val string) {
	switch u, err := url.Parse(val); {
	case val == "":
		v.add(key, "is empty", "set an http:// or https:// URL")
	case err != nil:
		v.add(key, "is not a valid URL", "write an absolute http:// or https:// URL")
	case u.Scheme != "http" && u.Scheme != "https":
		v.add(key, "is not an http or https URL", "start it with http:// or https://")
	case u.Host == "":
		v.add(key, "has no host", "write it like https://host.example.com")
	}
}

func (v *validator) listen(c *Config) {
	type addr struct {
		key, host string
		port      int
	}
	var ok []addr
	for _, a := range []struct{ key, val string }{
		{"listen.proxy", c.Listen.Proxy},
		{"listen.approvals", c.Listen.Approvals},
		{"listen.admin", c.Listen.Admin},
	} {
		host, port, err := net.SplitHostPort(a.val)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || p < 0 || p > 65535 {
			v.add(a.key, fmt.Sprintf("%q is not a host:port address", a.val), "write it like 127.0.0.1:8080, or :8080 for every interface")
			continue
		}
		for _, b := range ok {
			// Port 0 asks the kernel for a free port, so it never clashes.
			// The proxy shares its port with nothing, on any interface:
			// agents must never reach approvals or admin through it.
			if p == 0 || p != b.port {
				continue
			}
			if b.key == "listen.proxy" || sameHost(host, b.host) {
				v.add(a.key, fmt.Sprintf("uses port %d, as %s does", p, b.key), "give every listener its own port; agents must never reach approvals or admin on the proxy's port")
			}
		}
		ok = append(ok, addr{a.key, host, p})
	}
	switch {
	case c.PublicURL != "":
		// Paths are joined to it (/approve/…, the sign-in callback): a
		// query or fragment would swallow them.
		if !v.pathURL("public_url", c.PublicURL) {
			break
		}
		// Every approval link (the page, CloudEvents, Slack, Teams, the
		// approvals API) starts with it, so a password in it would reach
		// every channel approvers are notified on.
		v.noUserInfo("public_url", c.PublicURL, "approval links, in every notification, carry this URL")
	case len(ok) == 3:
		// With a bad listen.approvals there is no default to derive, and
		// that error already says what to fix.
		v.add("public_url", "is empty", "set public_url to the approvals listener's URL as approvers reach it")
	}
	if c.ProxyPublicURL != "" {
		v.baseURL("proxy_public_url", c.ProxyPublicURL)
	}
}

// baseURL checks that val, the value of key, is an absolute http or https
// URL other URLs are built under: a path may follow the host, but no
// query, fragment or credentials, which would end up in every URL built.
func (v *validator) baseURL(key, val string) {
	if v.pathURL(key, val) {
		v.noUserInfo(key, val, "agents see this URL")
	}
}

// noUserInfo refuses val, the value of key, when it carries a user or
// password before its host; who says who would see them.
func (v *validator) noUserInfo(key, val, who string) {
	if u, err := url.Parse(val); err == nil && u.User != nil {
		v.add(key, "carries credentials", "remove the user and password before the host: "+who)
	}
}

// pathURL checks that val, the value of key, is an absolute http or https
// URL whose path others are joined to: no query or fragment, which a
// joined path would land inside of (an approved call's path becoming part
// of a query value) or which would be merged with a call's own query,
// a parameter then arriving twice though the policy saw it once. It
// reports whether val passed.
func (v *validator) pathURL(key, val string) bool {
	n := len(v.errs)
	v.httpURL(key, val)
	if len(v.errs) > n {
		return false
	}
	switch u, _ := url.Parse(val); {
	case u.RawQuery != "" || u.ForceQuery:
		v.add(key, "has a query", "remove everything from ? on")
	case u.Fragment != "" || strings.Contains(val, "#"):
		v.add(key, "has a fragment", "remove everything from # on")
	}
	return len(v.errs) == n
}

// sameHost reports whether two listeners on the same port would collide: the
// same host, or either on every interface.
func sameHost(a, b string) bool {
	wild := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || ip != nil && ip.IsUnspecified()
	}
	return a == b || wild(a) || wild(b)
}

func (v *validator) upstreams(us []Upstream) {
	if len(us) == 0 {
		v.add("upstreams", "no upstream is configured", "add at least one entry with a name and a url")
		return
	}
	names := map[string]string{}
	prefixes := map[string]string{}
	for i, u := range us {
		at := fmt.Sprintf("upstreams[%d]", i)
		switch {
		case u.Name == "":
			v.add(at+".name", "is empty", "name every upstream, e.g. notes")
		case !upstreamName.MatchString(u.Name):
			v.add(at+".name", fmt.Sprintf("%q is not a valid name", u.Name), "use lower-case letters, digits, - and _, starting with a letter or digit, at most 63 characters")
		case names[u.Name] != "":
			v.add(at+".name", fmt.Sprintf("%q is also the name of %s", u.Name, names[u.Name]), "give every upstream its own name")
		default:
			names[u.Name] = at
		}
		if v.pathURL(at+".url", u.URL) {
			// Not sent: an allowed call and an approved one would not
			// agree on whether the user and password go as Basic auth, and
			// the operator would believe the upstream protected.
			v.noUserInfo(at+".url", u.URL, "toolgate does not send them; keep the upstream reachable by toolgate alone (its network, a NetworkPolicy)")
		}
		v.oneOf(at+".protocol", u.Protocol, "rest", "mcp")
		switch err := proxy.CheckPrefix(u.Prefix); {
		case err != nil:
			v.add(at+".prefix", err.Error(), `write it like / or /notes/`)
		case prefixes[u.Prefix] != "":
			v.add(at+".prefix", fmt.Sprintf("%q is also the prefix of %s", u.Prefix, prefixes[u.Prefix]), "give every upstream its own prefix")
		default:
			prefixes[u.Prefix] = at
		}
		if u.MCPPath == "" || u.MCPPath[0] != '/' {
			v.add(at+".mcp_path", fmt.Sprintf("%q does not start with /", u.MCPPath), "write it like /mcp")
		}
		if u.Timeout <= 0 {
			v.add(at+".timeout", "must be positive", "write a duration such as 60s")
		}
		v.oneOf(at+".target_fold", u.TargetFold, "none", "windows")
		if u.Mode != "" {
			v.oneOf(at+".mode", u.Mode, policy.Modes()...)
		}
		for j, h := range u.StripHeaders {
			if !httpguts.ValidHeaderFieldName(h) {
				v.add(fmt.Sprintf("%s.strip_headers[%d]", at, j), fmt.Sprintf("%q is not a header field name", h),
					"write a name such as X-Internal-User: letters, digits and !#$%&'*+-.^_`|~, no spaces or colon")
			}
		}
	}
}

func (v *validator) identity(id *Identity) {
	// The keys and the JWT settings are the identity package's to judge:
	// what it refuses at start is refused here, in its words.
	for _, err := range unjoin(id.Options("").Check()) {
		if ce, ok := err.(*identity.ConfigError); ok {
			v.add(ce.Key, ce.Msg, ce.Fix)
			continue
		}
		v.add("identity", err.Error(), "")
	}
	for i, k := range id.APIKeys {
		// Empty keys and unusable characters are reported above.
		if k.Key != "" && strings.IndexFunc(k.Key.Reveal(), notTokenChar) < 0 {
			v.keyLength(fmt.Sprintf("identity.api_keys[%d].key", i), k.Key.Reveal(), keyFix)
		}
	}
	if len(id.APIKeys) == 0 && id.JWT == nil && !id.Anonymous {
		v.add("identity", "every call would be refused with 401", "add identity.api_keys or identity.jwt, or set identity.anonymous: true")
	}
	if len(id.BrowserOrigins) > 0 && !id.Anonymous {
		// Pages calling with credentials are not checked: the list would
		// look like a browser policy that is not there.
		v.add("identity.browser_origins", "is set, but only calls without credentials are checked, and identity.anonymous is off",
			"remove it, or set identity.anonymous: true")
	}
}

// unjoin returns the errors joined in err, or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func (v *validator) hooks(hs []Hook, us []Upstream) {
	names := map[string]int{}
	for i, h := range hs {
		at := fmt.Sprintf("hooks[%d]", i)
		if h.Name == "" {
			v.add(at+".name", "is empty", "name the hook (it labels its metrics and log lines), e.g. name: freeze")
		} else if j, dup := names[h.Name]; dup {
			v.add(at+".name", fmt.Sprintf("%q is also the name of hooks[%d]", h.Name, j), "give each hook its own name")
		} else {
			names[h.Name] = i
		}
		v.httpURL(at+".url", h.URL)
		if h.OnFailure != "" {
			v.oneOf(at+".on_failure", h.OnFailure, "deny", "ask", "allow")
		}
		if d := h.Timeout.Std(); d < 0 || d > 30*time.Second {
			v.add(at+".timeout", fmt.Sprintf("%v is outside 0 to 30s", d), "a hook is asked while the agent waits: keep it short, e.g. timeout: 2s")
		}
		v.webhookSecret(at+".secret", h.Secret.Reveal(), "the hook's receiver verifies with the same secret")
		v.hookUpstream(at+".match.upstream", h.Match.Upstream, us)
	}
}

// hookUpstream checks that a hook's upstream glob matches a configured
// upstream: one that matches none (a typo, "note" for "notes") would turn
// a guarding hook off without a word.
func (v *validator) hookUpstream(key, pattern string, us []Upstream) {
	if pattern == "" || pattern == "*" || len(us) == 0 {
		return
	}
	g, err := glob.Compile(pattern)
	if err != nil {
		v.add(key, fmt.Sprintf("%q is not a glob: %v", pattern, err), "write an upstream's name, or a glob such as notes-*")
		return
	}
	names := make([]string, len(us))
	for i, u := range us {
		if g.Match(u.Name) {
			return
		}
		names[i] = u.Name
	}
	v.add(key, fmt.Sprintf("%q matches none of the upstreams (%s)", pattern, strings.Join(names, ", ")),
		"write an upstream's name, a glob that matches one, or * for all")
}

func (v *validator) policy(p *Policy, id *Identity) {
	if p.Dir == "" && p.RulesFile == "" {
		v.add("policy", "no policy is configured", "set policy.dir to a directory of .rego files, or policy.rules_file to a rules table")
	}
	v.oneOf("policy.mode", p.Mode, policy.Modes()...)
	for _, subject := range slices.Sorted(maps.Keys(p.SubjectModes)) {
		key := "policy.subject_modes." + subject
		if subject == "" {
			v.add(key, "names an empty subject", "write the subject ID as the key, e.g. agent-ci: dont_ask")
		}
		v.oneOf(key, p.SubjectModes[subject], policy.Modes()...)
		v.knownSubject(key, subject, id)
	}
	if mh := p.ModeHeader; mh != nil {
		switch {
		case mh.Name == "" || !httpguts.ValidHeaderFieldName(mh.Name):
			v.add("policy.mode_header.name", fmt.Sprintf("%q is not a header name", mh.Name), "write a header name such as X-Toolgate-Mode")
		case len(mh.TrustedSubjects) == 0:
			v.add("policy.mode_header.trusted_subjects", "is empty, so the header would never be believed",
				"list the subject IDs that may choose their calls' mode, or remove mode_header")
		}
		for i, subject := range mh.TrustedSubjects {
			v.knownSubject(fmt.Sprintf("policy.mode_header.trusted_subjects[%d]", i), subject, id)
		}
	}
	v.oneOf("policy.default", p.Default, "deny", "ask")
	for i, name := range p.Capabilities {
		if name == "" || strings.ContainsFunc(name, unicode.IsSpace) {
			v.add(fmt.Sprintf("policy.capabilities[%d]", i), fmt.Sprintf("%q is not a built-in's name", name),
				"write the name of an OPA built-in such as http.send, without spaces")
		}
	}
}

func (v *validator) pending(p *Pending) {
	v.oneOf("pending.store", p.Store, "memory", "redis")
	if p.Store == "redis" {
		v.redisURL(p.RedisURL.Reveal())
		if strings.ContainsAny(p.RedisPrefix, "{}") {
			v.add("pending.redis_prefix", "holds { or }", "drop the braces: toolgate makes the prefix a Redis Cluster hash tag itself")
		}
	}
	if p.RedisMinReplicas < 0 {
		v.add("pending.redis_min_replicas", "is negative", "write 0 (no confirmation) or the number of replicas that must acknowledge each transition")
	}
	if p.RedisMinReplicas > 0 && p.Store != "redis" {
		v.add("pending.redis_min_replicas", "is set without the redis store", "set pending.store: redis, or leave redis_min_replicas out")
	}
	if n := p.RedisShards; n < 0 || n > 32 || n&(n-1) != 0 {
		v.add("pending.redis_shards", fmt.Sprintf("%d is not 1, 2, 4, 8, 16 or 32", n), "write a power of two up to 32, or leave it out (16 on a Redis Cluster, else 1)")
	}
	if p.RedisShards > 0 && p.Store != "redis" {
		v.add("pending.redis_shards", "is set without the redis store", "set pending.store: redis, or leave redis_shards out")
	}
	// Redis commands time out after 2s: WAIT must answer before that.
	if t := p.RedisReplicaTimeout.Std(); t < 0 || t > 1500*time.Millisecond {
		v.add("pending.redis_replica_timeout", fmt.Sprintf("%s is not between 0 and 1.5s", t), "write a duration such as 1s (0: the default, 1s)")
	}
	if p.TTL <= 0 {
		v.add("pending.ttl", "must be positive", "write a duration such as 1h")
	}
	switch {
	case p.Hold <= 0:
		v.add("pending.hold", "must be positive", "write a duration such as 25s")
	case p.TTL > 0 && p.Hold > p.TTL:
		v.add("pending.hold", fmt.Sprintf("%s is longer than pending.ttl (%s)", p.Hold, p.TTL), "hold a request at most as long as a call may wait")
	}
	if p.ResultTTL <= 0 {
		v.add("pending.result_ttl", "must be positive", "write a duration such as 24h")
	}
	if p.MaxResultBytes <= 0 {
		v.add("pending.max_result_bytes", "must be positive", "write a size such as 1MiB")
	}
}

// RedisSchemes are the pending.redis_url schemes toolgate connects with
// (cmd/toolgate's redisClient); those starting "rediss" use TLS.
var RedisSchemes = []string{
	"redis", "rediss", "unix",
	"redis+sentinel", "rediss+sentinel", "redis-sentinel", "rediss-sentinel",
	"redis+cluster", "rediss+cluster",
}

// redisURL checks the form of pending.redis_url without connecting. It holds
// a password more often than not, so it is never quoted.
func (v *validator) redisURL(s string) {
	const key = "pending.redis_url"
	u, err := url.Parse(s)
	switch {
	case s == "":
		v.add(key, `is empty, and pending.store is "redis"`, "set it, e.g. redis://127.0.0.1:6379/0, or use pending.store: memory")
	case err != nil:
		v.add(key, "is not a valid URL", "write it like redis://host:6379/0 or rediss://host:6380/0")
	case u.Scheme == "unix":
		if u.Path == "" {
			v.add(key, "has no socket path", "write it like unix:///run/redis.sock")
		}
	case !slices.Contains(RedisSchemes, u.Scheme):
		v.add(key, "has an unsupported scheme", "use redis://, rediss://, redis+sentinel://, redis+cluster:// or unix://")
	case u.Host == "":
		v.add(key, "has no host", "write it like redis://host:6379/0")
	}
}

func (v *validator) approvals(a *Approvals, apiKeys []APIKey, publicURL string) {
	switch {
	case a.Secret == "":
		v.add("approvals.secret", "is not set", "generate one with: openssl rand -base64 48")
	case len(a.Secret) < approvals.MinSecretBytes:
		v.add("approvals.secret", fmt.Sprintf("is shorter than %d bytes", approvals.MinSecretBytes), "generate one with: openssl rand -base64 48")
	}
	if n := len(a.PreviousSecrets); n > approvals.MaxPreviousSecrets {
		v.add("approvals.previous_secrets", fmt.Sprintf("holds %d secrets, more than %d", n, approvals.MaxPreviousSecrets),
			"drop those that stopped signing more than pending.ttl ago: their links have expired")
	}
	for i, s := range a.PreviousSecrets {
		at := fmt.Sprintf("approvals.previous_secrets[%d]", i)
		switch {
		case len(s) < approvals.MinSecretBytes:
			v.add(at, fmt.Sprintf("is shorter than %d bytes", approvals.MinSecretBytes), "a previous secret is one that approvals.secret held")
		case s == a.Secret:
			v.add(at, "is approvals.secret itself", "list only the secrets that signed before approvals.secret")
		}
	}

	agentKeys := map[string]string{}
	for i, k := range apiKeys {
		if k.Key != "" {
			agentKeys[k.Key.Reveal()] = fmt.Sprintf("identity.api_keys[%d].key", i)
		}
	}
	names := map[string]string{}
	keys := map[string]string{}
	for i, ap := range a.Approvers {
		at := fmt.Sprintf("approvals.approvers[%d]", i)
		switch {
		case ap.Name == "":
			v.add(at+".name", "is empty", "name every approver, e.g. alice")
		case names[ap.Name] != "":
			v.add(at+".name", fmt.Sprintf("%q is also the name of %s", ap.Name, names[ap.Name]), "give every approver their own name")
		case !norm.NFC.IsNormalString(ap.Name):
			v.add(at+".name", notComposed, composeFix(ap.Name))
		default:
			names[ap.Name] = at
		}
		for j, g := range ap.Groups {
			if strings.TrimSpace(g) == "" {
				v.add(fmt.Sprintf("%s.groups[%d]", at, j), "is empty", "remove the empty entry")
			}
		}
		// An entry without a key gives no API access: it names the groups
		// of an approver known by approvals.identity or Slack.
		switch k := ap.Key.Reveal(); {
		case k == "" && len(ap.Groups) == 0:
			v.add(at+".key", "is empty, and the entry has no groups either", "set key for access to the approvals API, groups for an approver known by approvals.identity or Slack, or remove the entry")
		case k == "":
		case strings.IndexFunc(k, notTokenChar) >= 0:
			// Such a key could never arrive as one bearer token.
			v.add(at+".key", "contains whitespace or control characters", "strip them; a trailing newline from a file?")
		case len(k) < MinKeyBytes:
			v.add(at+".key", fmt.Sprintf("is shorter than %d bytes", MinKeyBytes), keyFix)
		case agentKeys[k] != "":
			v.add(at+".key", "is the same key as "+agentKeys[k], "an agent must never be able to approve its own calls; give the approver a different key")
		case keys[k] != "":
			v.add(at+".key", "is the same key as "+keys[k]+".key", "give every approver their own key")
		default:
			keys[k] = at
		}
	}

	for i, n := range a.Notify {
		at := fmt.Sprintf("approvals.notify[%d]", i)
		v.httpURL(at+".url", n.URL)
		v.oneOf(at+".format", n.Format, "cloudevents", "slack", "teams")
		v.webhookSecret(at+".secret", n.Secret.Reveal(), "the receiver verifies with the same secret")
		if n.Concurrency < 1 || n.Concurrency > 64 {
			v.add(at+".concurrency", fmt.Sprintf("%d is outside 1..64", n.Concurrency), "write a whole number from 1 to 64; 1 sends every event in order")
		}
	}
	if a.Identity != nil {
		v.approvalsIdentity(a.Identity, publicURL)
	} else if a.RequesterSignIn {
		v.add("approvals.requester_sign_in", "is true but approvals.identity is not set", "set approvals.identity, through which the requester signs in, or remove requester_sign_in")
	}
	if a.Slack != nil {
		v.slack(a.Slack)
	}
}

func (v *validator) limitsAndLog(c *Config) {
	const lo, hi = 1 << 10, 1 << 30
	l := &c.Limits
	if b := l.MaxBodyBytes; b < lo || b > hi {
		v.add("limits.max_body_bytes", fmt.Sprintf("%s is outside 1KiB..1GiB", b), "write a size such as 1MiB")
	}
	if t := l.MaxBodyBytesTotal; t < l.MaxBodyBytes || t > 1<<40 {
		v.add("limits.max_body_bytes_total", fmt.Sprintf("%s is outside limits.max_body_bytes (%s)..1TiB", t, l.MaxBodyBytes), "write a size such as 64MiB, at least limits.max_body_bytes")
	}
	if l.BodyTimeout <= 0 {
		v.add("limits.body_timeout", "must be positive", "write a duration such as 10s")
	}
	if l.MaxParkedPerSubject < 1 {
		v.add("limits.max_parked_per_subject", fmt.Sprintf("%d is less than 1", l.MaxParkedPerSubject), "write a whole number such as 100")
	}
	switch {
	case l.MaxParked < 1:
		v.add("limits.max_parked", fmt.Sprintf("%d is less than 1", l.MaxParked), "write a whole number such as 10000")
	case l.MaxParkedPerSubject >= 1 && l.MaxParked < l.MaxParkedPerSubject:
		v.add("limits.max_parked", fmt.Sprintf("%d is less than limits.max_parked_per_subject (%d)", l.MaxParked, l.MaxParkedPerSubject),
			"one principal may park at most as many calls as all together; raise limits.max_parked or lower limits.max_parked_per_subject")
	}
	if l.MaxParksPerMinute < 0 || l.MaxParksPerMinute > 6000 {
		v.add("limits.max_parks_per_minute", fmt.Sprintf("%d is outside 0..6000", l.MaxParksPerMinute), "write a whole number such as 30, or 0 for no limit")
	}
	if l.MaxHeldPerSubject < 1 || l.MaxHeldPerSubject > 100000 {
		v.add("limits.max_held_per_subject", fmt.Sprintf("%d is outside 1..100000", l.MaxHeldPerSubject), "write a whole number such as 100")
	}
	if l.MaxForwardsPerSubject < 1 || l.MaxForwardsPerSubject > 1000000 {
		v.add("limits.max_forwards_per_subject", fmt.Sprintf("%d is outside 1..1000000", l.MaxForwardsPerSubject), "write a whole number such as 1000")
	}
	if l.MaxHookRequests < 1 || l.MaxHookRequests > 65536 {
		v.add("limits.max_hook_requests", fmt.Sprintf("%d is outside 1..65536", l.MaxHookRequests), "write a whole number such as 256")
	}
	if l.MaxConnections < 16 || l.MaxConnections > 1000000 {
		v.add("limits.max_connections", fmt.Sprintf("%d is outside 16..1000000", l.MaxConnections), "write a whole number such as 10000")
	}
	if l.MaxConnectionsPerSource < 0 || l.MaxConnectionsPerSource > l.MaxConnections {
		v.add("limits.max_connections_per_source", fmt.Sprintf("%d is outside 0..limits.max_connections (%d)", l.MaxConnectionsPerSource, l.MaxConnections),
			"write a whole number such as 100, or 0 for no cap per source")
	}
	v.oneOf("limits.lossy_numbers", l.LossyNumbers, "refuse", "allow")
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.decisions(&c.Log.Decisions)
	if c.ShutdownGrace < 0 {
		v.add("shutdown_grace", "is negative", "write a duration such as 20s")
	}
}

// joinOr lists words as "a, b or c".
func joinOr(words []string) string {
	var s strings.Builder
	for i, w := range words {
		switch {
		case i == 0:
		case i == len(words)-1:
			s.WriteString(" or ")
		default:
			s.WriteString(", ")
		}
		s.WriteString(w)
	}
	return s.String()
}

// knownSubject checks that subject, named at key, is one a caller can
// have: an API key's, the anonymous caller's when anonymous calls are on,
// or a JWT's (any subject_prefix of it). A name no caller has (a typo,
// ci_bot for ci-bot) would leave the agent it meant in another mode
// without a word.
func (v *validator) knownSubject(key, subject string, id *Identity) {
	if subject == "" {
		return // reported where the name is read
	}
	if id.JWT != nil && strings.HasPrefix(subject, id.JWT.SubjectPrefix) {
		return
	}
	if id.Anonymous && subject == identity.AnonymousID {
		return
	}
	known := make([]string, 0, len(id.APIKeys))
	for _, k := range id.APIKeys {
		if k.Subject == subject {
			return
		}
		known = append(known, k.Subject)
	}
	msg := fmt.Sprintf("%q is no caller's subject", subject)
	if len(known) > 0 {
		msg += " (the API keys' are " + strings.Join(slices.Compact(slices.Sorted(slices.Values(known))), ", ") + ")"
	}
	fix := "write the subject ID of an API key"
	if id.JWT != nil {
		fix += ", or one starting with identity.jwt.subject_prefix " + strconv.Quote(id.JWT.SubjectPrefix)
	}
	v.add(key, msg, fix)
}
