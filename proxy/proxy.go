// Package proxy is toolgate's HTTP surface for agents: it turns each request
// into a policy input, asks a Decider, and forwards exactly what was decided
// on, hands an ask to the lifecycle of parked calls, or answers for itself.
// Every path of a call ends in one answer value, rendered once in the
// call's protocol. It decides nothing: the verdict is always the Decider's.
// It knows nothing of Rego, of config files or of Redis.
package proxy

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/strictjson"
	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// Decider decides one call. *policy.Engine implements it. An error means the
// call could not be decided; the proxy then refuses it. A Decider bounds its
// own time (policy.Options.Timeout): the proxy sets no deadline of its own,
// which would cost every call a timer that only OPA's evaluation needs.
type Decider interface {
	Decide(context.Context, *policy.Input) (policy.Decision, error)
}

// Authenticator identifies the caller of a request. *identity.Authenticator
// implements it. Errors wrapping identity.ErrUnauthenticated answer 401.
type Authenticator interface {
	Authenticate(*http.Request) (identity.Subject, error)
}

// Upstream is one tool server behind toolgate.
type Upstream struct {
	Name       string
	URL        *url.URL
	Protocol   string // "rest" or "mcp"
	Prefix     string // requests under this path prefix go here; a prefix other than "/" is stripped
	MCPPath    string // for "mcp": the JSON-RPC endpoint path at the upstream (default /mcp)
	TargetArgs []string
	// Timeout bounds the wait for the upstream's response headers; past it
	// the agent gets 504. Zero means 60s.
	Timeout time.Duration
	// ToolQuery lets a REST tool call carry a query string (the policy
	// sees it in http.query); otherwise a tool call with one is refused,
	// since its arguments belong in the body the policy reads.
	ToolQuery bool
	// TargetFold is how the tool's target is normalised for this
	// upstream: "" or "none", or "windows" (case-folded, trailing dots and
	// spaces of each segment removed) for tools that resolve names so.
	TargetFold string
	// StripHeaders are more request headers that never reach this
	// upstream (identity or routing claims only toolgate may make).
	StripHeaders []string
	// Mode, when set, replaces Config.Mode for this upstream's calls.
	Mode string
	// DryRun forwards every call to this upstream whatever its decision,
	// which is still computed, logged and counted; the agent sees
	// X-Toolgate-Decision: dry-run:<action>.
	DryRun bool
	// Transport, if set, replaces the tuned default (tests).
	Transport http.RoundTripper
	// Dial, if set, opens the tuned default's connections instead of
	// dialling URL's host: the quickstart reaches its example tools in
	// memory, on no port another process could call.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Config configures a Server.
type Config struct {
	Upstreams    []Upstream
	Decider      Decider
	Auth         Authenticator
	MaxBodyBytes int64 // limit on request bodies, after decoding too
	// MaxBodyBytesTotal bounds the body bytes read at once over all
	// requests (default 64 MiB, at least MaxBodyBytes): a request whose
	// body would pass it is 503 at once.
	MaxBodyBytesTotal int64
	// BodyTimeout bounds the arrival of a whole request body; past it the
	// request is refused (408) and its connection closed. Zero means 10s.
	BodyTimeout time.Duration
	// AllowLossyNumbers accepts JSON number literals that a float64 reads
	// as another decimal value (9007199254740993); by default they are
	// refused, since the policy and the upstream could read two numbers.
	AllowLossyNumbers bool
	Mode              string // permission mode put in every input ("" = default)
	// Hooks, if set, are asked about tool calls before the policy.
	Hooks HookRunner
	// Grants, if set, are remembered approvals that turn a later ask in
	// their scope into allow (usually the Pending store).
	Grants pending.Grants
	// Listings, if set, share what tools/list answers told of MCP tools
	// with the other replicas (listings.go): a store they all read, such
	// as a Redis Pending store. Unset, each replica knows the listings it
	// relayed itself.
	Listings pending.Listings
	// GrantKey keys the digest that binds a grant to the credentials'
	// values its call sent (grantExtras): the same on every replica
	// (GrantKey of the approvals secret), so that a grant made through one
	// is honoured by all. Without it a grant binds those headers by name
	// alone.
	GrantKey []byte
	// SealKeys seal the calls this Server parks (the first) and are the
	// keys a call it runs may be sealed with (all): SealKey of the
	// approvals secret and of the secrets before it (seal.go). Without
	// them the Server has a key of its own.
	SealKeys [][]byte
	// SubjectModes are modes by subject ID, before the upstream's Mode.
	SubjectModes map[string]string
	// ModeHeader, when set, is a request header that sets the call's mode,
	// believed only from ModeHeaderSubjects (subject IDs).
	ModeHeader         string
	ModeHeaderSubjects []string
	Logger             *slog.Logger
	Metrics            *Metrics // nil: a private registry
	// TracerProvider, if set, traces every call (server, decision, upstream
	// and execution spans); nil turns tracing off at no cost per call.
	// Propagator reads and writes trace context headers; nil means W3C
	// trace context and baggage.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// DecisionLog receives the record of every decided call; nil logs none.
	DecisionLog DecisionLogger
	// Pending parks calls the policy answers "ask"; nil answers them 503.
	Pending pending.Store
	// Hold is how long an agent's request is held waiting for a decision
	// (pending.hold); TTL how long a call waits before it expires.
	Hold, TTL time.Duration
	// MaxHeldPerSubject bounds how many of one principal's requests are
	// held at once (asks and status long-polls); past it a request is
	// answered at once, as with "Prefer: respond-async". 0: no bound.
	MaxHeldPerSubject int
	// MaxForwardsPerSubject bounds how many of one principal's allowed
	// calls are forwarded at once; past it a call is refused (429) before
	// it reaches the upstream. 0: no bound.
	MaxForwardsPerSubject int
	// MaxResultBytes bounds a stored result's body.
	MaxResultBytes int64
	// ProxyPublicURL is the proxy listener as agents reach it: an absolute
	// http(s) URL, a path prefix included, with no query or fragment (the
	// caller checks it). When set, every status URL handed to agents is
	// absolute ([StatusURL]); empty, they are relative.
	ProxyPublicURL string
	// ConfirmURL, if set, is the link to a parked call's confirmation
	// page, which an MCP client that declares URL elicitation is handed
	// for calls its requester may confirm (confirm.go); nil offers none.
	ConfirmURL func(pending.Call) string
	// OnPark is called once for every newly parked call (notifications);
	// OnResolve for every call the proxy ends: expired or unknown (the
	// sweeper), cancelled (the agent). Approvers' decisions are the
	// approvals handler's to report.
	OnPark, OnResolve func(pending.Call)
	// Handoff, if set, is shared with the approvals listener of this
	// replica, which decides through it (lifecycle.Handoff): an approval
	// made here hands the call to its request held here.
	Handoff *lifecycle.Handoff
	// Now and NewCallID may be replaced in tests.
	Now       func() time.Time
	NewCallID func() string

	serverHook func(*Server) // tests: receives the Server New built
}

// Server serves the proxy listener. It is safe for concurrent use.
type Server struct {
	cfg       Config
	upstreams []*upstream // longest prefix first
	log       *slog.Logger
	metrics   *Metrics
	tracing   *tracing           // nil: tracing is off
	json      strictjson.Options // how bodies are read
	seals     *sealer            // seals parked calls, checks them before they run (seal.go)
	// life runs parked calls; nil when nothing is parked (no store).
	life *lifecycle.Lifecycle
	// heldMCP: the MCP requests held here for a decision, which the
	// client may cancel (mcpcancel.go).
	heldMCP heldRequests
	// placeID, when set, makes a call's ID once its principal is known:
	// a store sharded by principal reads the shard from the ID
	// (pending.PlaceID).
	placeID  func(id, principal string) string
	draining atomic.Bool
	inflight atomic.Int64 // calls being served (serveCall), for WaitIdle
	// fwdHost is the X-Forwarded-Host of every forwarded call
	// (forwardedHost).
	fwdHost string
	// headersKeyID starts the headers' digests parked calls keep
	// (headersDigest).
	headersKeyID string
	held         *principalLimit
	// forwarding counts each principal's allowed calls being forwarded
	// (Config.MaxForwardsPerSubject).
	forwarding *principalLimit
	// bodies is MaxBodyBytesTotal, and what the bodies being read and
	// decided hold of it.
	bodies *bodyBudget
}

var prefixPattern = regexp.MustCompile(`^/([A-Za-z0-9._~-]+/)*$`)

// New checks cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Decider == nil || cfg.Auth == nil {
		return nil, errors.New("proxy: a Decider and an Authenticator are required")
	}
	if len(cfg.Upstreams) == 0 {
		return nil, errors.New("proxy: at least one upstream is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxBodyBytesTotal <= 0 {
		cfg.MaxBodyBytesTotal = 64 << 20
	}
	cfg.MaxBodyBytesTotal = max(cfg.MaxBodyBytesTotal, cfg.MaxBodyBytes)
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Hold <= 0 {
		cfg.Hold = 25 * time.Second
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = 1 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewCallID == nil {
		// 26 base32 characters, 130 bits from crypto/rand: a call ID may be
		// handed out as the key to a parked call's status, so it must be
		// unguessable.
		cfg.NewCallID = rand.Text
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics, tracing: newTracing(cfg), fwdHost: forwardedHost(cfg.ProxyPublicURL),
		held: newPrincipalLimit(cfg.MaxHeldPerSubject), forwarding: newPrincipalLimit(cfg.MaxForwardsPerSubject),
		bodies: newBodyBudget(cfg.MaxBodyBytesTotal, cfg.MaxBodyBytes),
		seals:  newSealer(cfg.SealKeys), headersKeyID: headersKeyID(cfg.GrantKey),
	}
	if st, ok := cfg.Pending.(interface{ Sharded() bool }); ok && st.Sharded() {
		s.placeID = pending.PlaceID
	}
	s.json.RefuseLossyNumbers = !cfg.AllowLossyNumbers
	if cfg.Pending != nil {
		var err error
		s.life, err = lifecycle.New(lifecycle.Config{
			Store: cfg.Pending, Executor: executor{s}, TTL: cfg.TTL, Logger: cfg.Logger,
			OnPark: func(pc pending.Call) {
				s.metrics.parked.Inc()
				if cfg.OnPark != nil {
					cfg.OnPark(pc)
				}
			},
			OnResolve: cfg.OnResolve,
			Handoff:   cfg.Handoff,
		})
		if err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, u := range cfg.Upstreams {
		if err := u.withDefaults(); err != nil {
			return nil, err
		}
		if seen[u.Prefix] {
			return nil, fmt.Errorf("proxy: upstream %s: prefix %q is used twice", u.Name, u.Prefix)
		}
		seen[u.Prefix] = true
		s.upstreams = append(s.upstreams, s.newUpstream(u))
		for _, a := range []policy.Action{policy.Allow, policy.Ask, policy.Deny} {
			s.metrics.dryRun.WithLabelValues(a.String(), u.Name) // series from the start, at zero
		}
		s.metrics.notShared.WithLabelValues(u.Name)
	}
	slices.SortFunc(s.upstreams, func(a, b *upstream) int { return len(b.Prefix) - len(a.Prefix) })
	if cfg.serverHook != nil {
		cfg.serverHook(s)
	}
	return s, nil
}

// CheckPrefix reports whether p can be an upstream's path prefix: it starts
// and ends with / and its segments hold only unreserved characters, so it
// is spelled the same in the raw and the decoded path; and it is not under
// /_toolgate/, which toolgate answers itself.
func CheckPrefix(p string) error {
	if !prefixPattern.MatchString(p) {
		return fmt.Errorf("%q must start and end with / and hold only letters, digits and ._~-", p)
	}
	if strings.HasPrefix(p, ownPrefix) {
		return fmt.Errorf("%q is under %s, which toolgate answers itself and never forwards", p, ownPrefix)
	}
	return nil
}

// ownPrefix is the path toolgate answers itself on the proxy listener
// (routes.go): the status of parked calls, and 404 for the rest.
const ownPrefix = "/_toolgate/"

// withDefaults checks u and fills in its defaults.
func (u *Upstream) withDefaults() error {
	if u.Prefix == "" {
		u.Prefix = "/"
	}
	if err := CheckPrefix(u.Prefix); err != nil {
		return fmt.Errorf("proxy: upstream %s: prefix %w", u.Name, err)
	}
	if u.URL == nil || u.URL.Host == "" || (u.URL.Scheme != "http" && u.URL.Scheme != "https") {
		return fmt.Errorf("proxy: upstream %s: url must be absolute http(s)", u.Name)
	}
	if u.URL.RawQuery != "" || u.URL.ForceQuery || u.URL.Fragment != "" {
		// A call's path is joined to the URL's: an approved call's would
		// land in the query, a live call's query be merged with it.
		return fmt.Errorf("proxy: upstream %s: url must have no query or fragment", u.Name)
	}
	if u.Protocol == "" {
		u.Protocol = policy.KindREST
	}
	if u.Protocol != policy.KindREST && u.Protocol != policy.KindMCP {
		return fmt.Errorf("proxy: upstream %s: protocol %q is not supported (rest, mcp)", u.Name, u.Protocol)
	}
	if u.MCPPath == "" {
		u.MCPPath = "/mcp"
	}
	if _, err := policy.ParseFold(u.TargetFold); err != nil {
		return fmt.Errorf("proxy: upstream %s: %w", u.Name, err)
	}
	if u.TargetArgs == nil {
		u.TargetArgs = policy.DefaultTargetArgs
	}
	if u.Timeout <= 0 {
		u.Timeout = 60 * time.Second
	}
	return nil
}

// Drain makes the proxy refuse new calls with 503 (SIGTERM: readiness turns
// 503 and new calls stop while the listener drains).
// Held agents are answered at once with their 202 (the call stays parked).
func (s *Server) Drain() {
	s.draining.Store(true)
	if s.life != nil {
		s.life.Drain()
	}
}

// WaitIdle returns once no call is being served, or when ctx ends. After
// Drain, new calls are answered 503 at once, so what it waits for is the
// calls admitted before: the listener stays open meanwhile, and a call
// sent here late gets a 503 to retry elsewhere, not a refused connection.
func (s *Server) WaitIdle(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep runs the background work of parked calls until ctx ends, every
// interval: expiry, and the execution of approved calls nobody holding
// their agent claimed within grace (lifecycle.Lifecycle.Sweep).
func (s *Server) Sweep(ctx context.Context, interval, grace time.Duration) {
	if s.life != nil {
		s.life.Sweep(ctx, interval, grace)
	}
}

// Settle ends the parked calls' work at shutdown (lifecycle.Lifecycle.Settle):
// call it once the proxy and approvals listeners are closed.
func (s *Server) Settle(ctx context.Context, runApproved bool) (done bool) {
	if s.life == nil {
		return true
	}
	return s.life.Settle(ctx, runApproved)
}

// route returns the upstream whose prefix is the longest match of p, and p
// relative to it ("/" + the rest); nil when none matches.
func (s *Server) route(p string) (*upstream, string) {
	for _, u := range s.upstreams {
		if u.Prefix == "/" {
			return u, p
		}
		if strings.HasPrefix(p, u.Prefix) {
			return u, "/" + p[len(u.Prefix):]
		}
		if p+"/" == u.Prefix {
			return u, "/"
		}
	}
	return nil, ""
}
