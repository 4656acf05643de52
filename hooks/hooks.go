// Package hooks asks external services about a tool call before it runs:
// PreToolUse hooks. A hook brings facts the policy cannot know from its
// configuration (a change freeze, a ticket's state, a risk score) into a
// decision.
//
// For every call that a hook's matcher (an upstream glob and a tool glob)
// selects, the [Runner] POSTs the policy input document to the hook and
// reads back
//
//	{"decision": "allow" | "ask" | "deny" | "none", "reason": "…", "updated_arguments": {…}}
//
// Matching hooks are asked concurrently and their opinions combine deny >
// ask > allow > none into a [Verdict]. A hook that times out, fails,
// answers with a status other than 2xx (a redirect is never followed) or
// answers anything but the document above counts as its configured
// failure answer, deny unless configured otherwise.
//
// The package decides nothing else: what a verdict means next to the
// policy's own decision and the permission modes, and what the upstream
// receives, are the caller's. It knows nothing of policies, proxying or
// parked calls, and sends nothing but the bytes it is given: no
// credentials, no cookies, no headers beyond Content-Type, User-Agent and
// the Standard Webhooks ones.
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gobwas/glob"

	"github.com/toolgate/toolgate/internal/logthrottle"
	"github.com/toolgate/toolgate/internal/toolname"
)

// The four answers a hook may give, and the outcome label of a hook that
// failed.
const (
	Allow = "allow"
	Ask   = "ask"
	Deny  = "deny"
	None  = "none"

	// Failure is the outcome given to [Options.OnResult] for a hook that
	// failed; its opinion is then its on_failure answer.
	Failure = "failure"
)

// Limits.
const (
	DefaultTimeout     = 2 * time.Second
	MaxTimeout         = 30 * time.Second
	DefaultMaxInFlight = 256
	// callerShare: a caller's share is a quarter of MaxInFlight.
	callerShare = 4

	// MaxResponseBytes caps a hook's response body; a longer one is a
	// failure.
	MaxResponseBytes = 1 << 20
	// MaxReasonBytes caps a hook's reason; a longer one is a failure.
	MaxReasonBytes = 1024

	maxNameLen = 64
	userAgent  = "toolgate-hooks"
)

// Hook is one configured hook.
type Hook struct {
	// Name identifies the hook in reasons, logs and metrics: 1 to 64
	// letters, digits, '.', '_' or '-', unique among the hooks.
	Name string
	// URL is where the input document is POSTed: http or https, without
	// user information (authenticate toolgate to the hook with Secret).
	URL string
	// Upstream and Tool are globs (github.com/gobwas/glob, no separators)
	// on the upstream's and the tool's name; empty means "*". A hook runs
	// for a call only when both match.
	Upstream string
	Tool     string
	// Timeout bounds one request, body included: zero means
	// DefaultTimeout; at most MaxTimeout.
	Timeout time.Duration
	// OnFailure is the hook's opinion when it times out, fails, answers a
	// status other than 2xx or answers something unreadable: "deny" (the
	// default, also for ""), "ask" or "allow".
	OnFailure string
	// Secret, when set, signs every request the Standard Webhooks way:
	// "whsec_" followed by the base64 of the key, or the key's raw bytes.
	Secret string
}

// LogValue keeps the secret and the URL (which may carry a token) out of
// logs.
func (h Hook) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", h.Name), slog.String("upstream", h.Upstream),
		slog.String("tool", h.Tool), slog.Duration("timeout", h.Timeout),
		slog.String("on_failure", h.OnFailure), slog.Bool("signed", h.Secret != ""))
}

// Options configures a Runner. The zero value runs no hooks.
type Options struct {
	Hooks []Hook
	// Client sends the requests. Nil means a client of the Runner's own,
	// with a transport cloned from http.DefaultTransport. A given client
	// is used with its cookie jar removed and redirects refused; its
	// transport should bound idle connections (MaxIdleConnsPerHost).
	Client *http.Client
	// Logger receives a warning when a hook fails: at most one per hook
	// and kind of failure every failWarnEvery, with how many were left
	// out. Nil means slog.Default().
	Logger *slog.Logger
	// Now gives webhook-timestamp. Nil means time.Now. Durations are
	// measured with the monotonic clock regardless.
	Now func() time.Time
	// OnResult, if set, is called once per hook run, with the hook's name,
	// its outcome (allow, ask, deny, none or failure) and how long it took.
	// Run calls it from its own goroutine after all hooks of the call have
	// answered, never concurrently for one call (but concurrently for
	// concurrent calls).
	OnResult func(hook, outcome string, d time.Duration)
	// MaxInFlight bounds the hook requests in flight across all calls;
	// one caller's share is a quarter of it (reserve). Zero means
	// DefaultMaxInFlight. A call whose hooks find no room asks none of
	// them and is denied, at once, rather than queueing behind the others.
	MaxInFlight int
}

// Opinion is one hook's answer, or the combined answer that decided.
type Opinion struct {
	Decision string // allow, ask, deny or none
	Hook     string // the hook; for a combined opinion, the one that decided
	// Reason is the hook's own reason, possibly empty; for a failure,
	// "hook <name> failed: <why>".
	Reason string
	// Failed says the hook did not answer usably; Decision is then its
	// on_failure answer.
	Failed bool
	// UpdatedArguments is the hook's replacement for the call's arguments,
	// a JSON object; nil when it gave none. A denying hook's is dropped.
	UpdatedArguments json.RawMessage
}

// Verdict is what the hooks of one call decided together.
type Verdict struct {
	// Decision is deny if any opinion is deny, else ask if any is ask,
	// else allow if any is allow, else none (also when no hook ran).
	Decision string
	// Reasons are the opinions with the winning decision, in
	// configuration order; nil for none.
	Reasons []Opinion
	// UpdatedArguments replaces the call's arguments when exactly one hook
	// rewrote them and the decision is not deny; nil otherwise.
	UpdatedArguments json.RawMessage
	UpdatedBy        string // the hook that rewrote them
	Ran              int    // how many hooks matched the call and were run
}

// Runner runs the configured hooks. It is safe for concurrent use.
type Runner struct {
	hooks    []hook
	client   *http.Client
	own      *http.Transport // the transport Close releases; nil for a given client
	log      *slog.Logger
	now      func() time.Time
	onResult func(hook, outcome string, d time.Duration)
	// The slots of hook requests in flight: a call takes one for each
	// hook it asks, all at once (reserve), or none. maxInFlight bounds
	// them; perCaller, a quarter of it, is one caller's share, past which
	// a caller's calls go on only while at most half the slots are taken,
	// so that no one principal holds more than half. inFlight and callers
	// (slots by caller) are guarded by mu.
	maxInFlight, perCaller int
	mu                     sync.Mutex
	inFlight               int
	callers                map[string]int
	// failed bounds the "hook failed" warnings, one a hook and reason
	// every failWarnEvery: an agent's calls can make a hook fail on every
	// call (a flood past MaxInFlight), and the metric counts each.
	failed *logthrottle.Throttle
}

// failWarnEvery is how often a hook's failure of one kind is logged.
const failWarnEvery = 10 * time.Second

// hook is a Hook validated and compiled.
type hook struct {
	name           string
	url            string
	upstream, tool *glob.Pattern
	// toolFold is the tool glob lower-cased, matched against the tool's
	// name lower-cased: routers that ignore case (Express's, ASP.NET
	// Core's) run DELETE_FILE as delete_file, which a hook on delete_*
	// must judge too.
	toolFold  *glob.Pattern
	timeout   time.Duration
	onFailure string
	key       []byte // nil: unsigned
}

func (h *hook) matches(upstream, tool string, rest bool) bool {
	if !h.upstream.Match(upstream) {
		return false
	}
	if h.tool.Match(tool) || h.toolFold.Match(strings.ToLower(tool)) {
		return true
	}
	if !rest {
		return false // MCP servers look tool names up exactly: fs.read_file is not fs
	}
	// Rails' (.:format) and Spring's suffix match run delete_file.json
	// (or delete_file.zzz) as delete_file.
	for _, base := range toolname.Prefixes(tool) {
		if h.tool.Match(base) || h.toolFold.Match(strings.ToLower(base)) {
			return true
		}
	}
	return false
}

// New validates opts and returns a Runner. Errors name the hook but never
// repeat its URL or secret.
func New(opts Options) (*Runner, error) {
	r := &Runner{
		client:   opts.Client,
		log:      opts.Logger,
		now:      opts.Now,
		onResult: opts.OnResult,
		failed:   logthrottle.New(failWarnEvery),
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.now == nil {
		r.now = time.Now
	}
	switch {
	case opts.MaxInFlight < 0:
		return nil, errors.New("hooks: max in flight must not be negative")
	case opts.MaxInFlight == 0:
		opts.MaxInFlight = DefaultMaxInFlight
	}
	r.maxInFlight, r.perCaller, r.callers = opts.MaxInFlight, max(1, opts.MaxInFlight/callerShare), map[string]int{}

	seen := make(map[string]bool, len(opts.Hooks))
	var errs []error
	for i, h := range opts.Hooks {
		c, err := compile(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("hooks: hook %d (%q): %w", i+1, h.Name, err))
			continue
		}
		if seen[c.name] {
			errs = append(errs, fmt.Errorf("hooks: hook %d: name %q is used twice", i+1, h.Name))
			continue
		}
		seen[c.name] = true
		r.hooks = append(r.hooks, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	if r.client == nil {
		r.own = defaultTransport()
		r.client = &http.Client{Transport: r.own}
	} else {
		c := *r.client
		r.client = &c
	}
	// A redirect would send the input document, and with it the
	// signature, to wherever the hook points; a 301/302/303 would turn the
	// POST into a GET whose answer the hook never gave for this call. A
	// 3xx is therefore a failure. A cookie jar could add Cookie headers.
	r.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	r.client.Jar = nil
	return r, nil
}

func compile(h Hook) (hook, error) {
	c := hook{name: h.Name, url: h.URL, timeout: h.Timeout, onFailure: h.OnFailure}
	if !validName(h.Name) {
		return c, fmt.Errorf("name must be 1 to %d letters, digits, '.', '_' or '-'", maxNameLen)
	}
	u, err := url.Parse(h.URL)
	switch {
	case err != nil:
		return c, errors.New("url does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return c, errors.New("url must be http or https")
	case u.Host == "":
		return c, errors.New("url has no host")
	case u.User != nil:
		return c, errors.New("url must not carry user information: use secret")
	}
	for _, g := range []struct {
		field, pattern string
		dst            **glob.Pattern
	}{{"upstream", h.Upstream, &c.upstream}, {"tool", h.Tool, &c.tool}, {"tool", strings.ToLower(h.Tool), &c.toolFold}} {
		if g.pattern == "" {
			g.pattern = "*"
		}
		if *g.dst, err = glob.Compile(g.pattern); err != nil {
			return c, fmt.Errorf("%s glob: %w", g.field, err)
		}
	}
	switch {
	case c.timeout == 0:
		c.timeout = DefaultTimeout
	case c.timeout < 0:
		return c, errors.New("timeout must not be negative")
	case c.timeout > MaxTimeout:
		return c, fmt.Errorf("timeout must be at most %s", MaxTimeout)
	}
	switch c.onFailure {
	case "":
		c.onFailure = Deny
	case Deny, Ask, Allow:
	default:
		return c, errors.New(`on_failure must be "deny", "ask" or "allow"`)
	}
	if c.key, err = parseSecret(h.Secret); err != nil {
		return c, err
	}
	return c, nil
}

func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// defaultTransport is http.DefaultTransport's configuration with idle
// connections bounded: hooks are few hosts asked often, so a few idle
// connections per host save a handshake per call without letting a burst
// leave hundreds open.
func defaultTransport() *http.Transport {
	var tr *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone()
	} else {
		tr = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	tr.MaxIdleConns = 128
	tr.MaxIdleConnsPerHost = 32
	tr.IdleConnTimeout = 90 * time.Second
	// No Accept-Encoding of net/http's own: a hook receives the headers
	// the package documents and no other.
	tr.DisableCompression = true
	return tr
}

// Close releases the idle connections of the Runner's own client. A given
// Options.Client is the caller's to manage. Run may still be called after
// Close; it opens new connections.
func (r *Runner) Close() {
	if r.own != nil {
		r.own.CloseIdleConnections()
	}
}

// Matches reports whether any hook matches a call to tool on upstream (a
// REST call's, whose name a router may read up to a dot, when rest), so
// callers can skip building the input document when none does.
func (r *Runner) Matches(upstream, tool string, rest bool) bool {
	for i := range r.hooks {
		if r.hooks[i].matches(upstream, tool, rest) {
			return true
		}
	}
	return false
}

// Run asks every hook matching the call, concurrently, with input (the
// policy input document) as the request body, and combines their opinions.
// It returns when every hook has answered, failed or timed out; a hook's
// time is bounded by its Timeout and by ctx. Run never returns an error:
// a hook that failed counts as its on_failure answer. A hook not asked
// because its requests in flight are at their bound (the caller's share,
// or all of them) denies: a flood of calls must not turn a hook into its
// on_failure answer. caller names the call's principal. With no hook
// matching, the verdict is none and Ran is 0.
func (r *Runner) Run(ctx context.Context, caller, upstream, tool string, rest bool, input []byte) Verdict {
	var matched []*hook
	for i := range r.hooks {
		if r.hooks[i].matches(upstream, tool, rest) {
			matched = append(matched, &r.hooks[i])
		}
	}
	if len(matched) == 0 {
		return Verdict{Decision: None}
	}
	// A slot for every hook the call asks, or none: a refused call asks no
	// hook, and each of them denies.
	busy := r.reserve(caller, len(matched))
	if busy == nil {
		defer r.release(caller, len(matched))
	}
	ops := make([]Opinion, len(matched))
	took := make([]time.Duration, len(matched))
	if len(matched) == 1 {
		ops[0], took[0] = r.ask(ctx, busy, matched[0], input) // no goroutine for the common case
	} else {
		var wg sync.WaitGroup
		for i, h := range matched {
			wg.Go(func() { ops[i], took[i] = r.ask(ctx, busy, h, input) })
		}
		wg.Wait()
	}
	if r.onResult != nil {
		for i, op := range ops {
			outcome := op.Decision
			if op.Failed {
				outcome = Failure
			}
			r.onResult(matched[i].name, outcome, took[i])
		}
	}
	return combine(ops)
}

// rank orders the decisions: the highest present wins.
func rank(decision string) int {
	switch decision {
	case Deny:
		return 3
	case Ask:
		return 2
	case Allow:
		return 1
	}
	return 0
}

// combine applies deny > ask > allow > none to the opinions (in
// configuration order) and settles the argument rewrite.
//
// At most one hook may rewrite a call. Two rewrites cannot both be what the
// upstream receives, and picking one (the first in configuration order, the
// first to answer) would let the order of a list or a race decide what
// runs; so when more than one hook rewrites, the verdict is deny, with a
// reason naming them. Denying and failed hooks contribute no rewrite.
func combine(ops []Opinion) Verdict {
	v := Verdict{Decision: None, Ran: len(ops)}
	var rewriters []int
	for i, op := range ops {
		if rank(op.Decision) > rank(v.Decision) {
			v.Decision = op.Decision
		}
		if op.UpdatedArguments != nil && op.Decision != Deny && !op.Failed {
			rewriters = append(rewriters, i)
		}
	}
	var conflict *Opinion
	if len(rewriters) > 1 {
		names := make([]string, len(rewriters))
		for i, k := range rewriters {
			names[i] = ops[k].Hook
		}
		v.Decision = Deny
		conflict = &Opinion{
			Decision: Deny,
			Hook:     ops[rewriters[len(rewriters)-1]].Hook,
			Reason: "hooks " + strings.Join(names, ", ") +
				" each rewrote the arguments; at most one hook may rewrite a call",
		}
	}
	for _, op := range ops {
		if op.Decision == v.Decision && v.Decision != None {
			v.Reasons = append(v.Reasons, op)
		}
	}
	if conflict != nil {
		v.Reasons = append(v.Reasons, *conflict)
	}
	if len(rewriters) == 1 && v.Decision != Deny {
		v.UpdatedArguments = ops[rewriters[0]].UpdatedArguments
		v.UpdatedBy = ops[rewriters[0]].Hook
	}
	return v
}
