package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	opaversion "github.com/open-policy-agent/opa/v1/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/deadline"
	"github.com/toolgate/toolgate/internal/gctune"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	shipped "github.com/toolgate/toolgate/rego"
)

// app is a wired toolgate: engine, identity, proxy and the three handlers.
// What it opens (trace pipeline, decision log, store, notifier, JWKS
// refresher) it releases in Close.
// appOption sets what an app is given beside its configuration.
type appOption func(*app)

// dialingUpstreams makes dial open every upstream connection (the
// quickstart's in-memory example tools).
func dialingUpstreams(dial func(ctx context.Context, network, addr string) (net.Conn, error)) appOption {
	return func(a *app) { a.dialUpstreams = dial }
}

type app struct {
	cfg      *config.Config
	log      *slog.Logger
	engine   *policy.Engine
	auth     *identity.Authenticator
	proxy    *proxy.Server
	parking  *parking
	settings *storeSettings // nil: the store has no settings to check (memory)
	dlog     *decisionLog   // nil: no decision log
	registry *prometheus.Registry
	tracing  tracing
	ready    atomic.Bool
	reloadMu sync.Mutex
	lastErr  error    // last policy reload error, for /readyz
	closers  []closer // in the order of opening
	// closeBy is when shutdown_grace ends, once serving stops: Close
	// must be done by then too.
	closeBy time.Time

	// dialUpstreams, when set, opens the upstreams' connections.
	dialUpstreams func(ctx context.Context, network, addr string) (net.Conn, error)
}

// closer releases one thing the app opened.
type closer struct {
	name string
	// timeout bounds close; zero leaves the bound to close itself.
	timeout time.Duration
	close   func(context.Context) error
}

// onClose registers fn, which releases what was just opened, to run at
// Close before whatever was opened earlier.
func (a *app) onClose(name string, timeout time.Duration, fn func(context.Context) error) {
	a.closers = append(a.closers, closer{name: name, timeout: timeout, close: fn})
}

// Close releases what the app opened, in the reverse order of opening,
// each step within its own time bound (and ctx's). It is for an app newApp
// gave up on as much as for one that served; a second Close does nothing.
// Serving must have ended first: serve returns only once the sweeper and
// the policy watcher no longer use the store.
func (a *app) Close(ctx context.Context) error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		c := a.closers[i]
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if c.timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, c.timeout)
		}
		if err := c.close(cctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
		cancel()
	}
	a.closers = nil
	return errors.Join(errs...)
}

// policySource says where the user's policies come from: a directory
// (watched) or, for the quickstart, an embedded tree.
type policySource struct {
	fsys fs.FS
	dir  string
}

func policySourceOf(cfg *config.Config) policySource {
	if cfg.Policy.Dir == "" {
		return policySource{}
	}
	return policySource{fsys: os.DirFS(cfg.Policy.Dir), dir: cfg.Policy.Dir}
}

// newEngine builds the policy engine a configuration describes.
//
// errorDetail keeps evaluation errors whole (policy.Options.ErrorDetail):
// the server keeps them so only with log.arguments, since they may quote
// a call's arguments; the policy commands always do.
//
// printTo receives what the policy's print() calls write (nil: nothing).
func newEngine(ctx context.Context, cfg *config.Config, src policySource, log *slog.Logger, onReload func(string, error), errorDetail bool, printTo func(location, message string)) (*policy.Engine, error) {
	if src.dir != "" {
		if st, err := os.Stat(src.dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("policy.dir: %s is not a readable directory (point it at the folder of your .rego files)", src.dir)
		}
	}
	def := policy.Deny
	if cfg.Policy.Default == "ask" {
		def = policy.Ask
	}
	e, err := policy.New(ctx, policy.Options{
		Library:       shipped.Library(),
		Policies:      src.fsys,
		RulesFile:     cfg.Policy.RulesFile,
		NativeLibrary: true,
		Default:       def,
		Capabilities:  cfg.Policy.Capabilities,
		ErrorDetail:   errorDetail,
		Print:         printTo,
		Logger:        log,
		OnReload:      onReload,
	})
	if err != nil && src.dir != "" {
		// The fix is in the files the error names; say where to try it.
		return nil, fmt.Errorf("%w\n(policy.dir %s: fix what is named above; toolgate config validate --config FILE loads the policy as serve does)", err, src.dir)
	}
	return e, err
}

// newApp wires a toolgate from a validated configuration. It listens on
// nothing (`config validate` builds the same app, then closes it). On
// error, what it had opened is closed again.
func newApp(ctx context.Context, cfg *config.Config, src policySource, log *slog.Logger, opts ...appOption) (_ *app, err error) {
	a := &app{cfg: cfg, log: log, registry: prometheus.NewRegistry()}
	for _, o := range opts {
		o(a)
	}
	defer func() {
		if err != nil {
			_ = a.Close(context.WithoutCancel(ctx))
		}
	}()
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reloaded, inForce := a.policyMetrics()
	// print() in a policy writes to the log at debug level, as opa run
	// does: what it prints of a call is the author's to choose.
	printTo := func(location, message string) {
		log.Debug("policy print", "location", location, "message", message)
	}
	if a.engine, err = newEngine(ctx, cfg, src, log, reloaded, cfg.Log.Arguments, printTo); err != nil {
		return nil, err
	}
	inForce(a.engine.Revision())

	// Opened in this order, closed in the reverse: the JWKS refresher
	// first, the notifier before the store, then the decision log (its last
	// events) and the trace pipeline (the last calls' spans).
	if a.tracing, err = newTracing(ctx, log); err != nil {
		return nil, err
	}
	a.onClose("tracing", 5*time.Second, a.tracing.flush)
	if a.dlog, err = newDecisionLog(ctx, cfg, a.engine, a.registry, log); err != nil {
		return nil, err
	}
	a.onClose("decision log", 5*time.Second, func(ctx context.Context) error {
		a.dlog.close(ctx) // the last events, and the upload of what is buffered
		return nil
	})
	if a.parking, err = newParking(cfg, a.registry, a); err != nil {
		return nil, err
	}
	a.settings = newStoreSettings(a.parking.store, log, a.registry)
	ic := cfg.Identity.Options(cfg.ProxyPublicURL)
	ic.Logger = log
	if a.auth, err = identity.New(ic); err != nil {
		return nil, err
	}
	a.onClose("identity", 0, func(context.Context) error { return a.auth.Close() })
	ups, err := proxyUpstreams(cfg)
	if err != nil {
		return nil, err
	}
	for i := range ups {
		ups[i].Dial = a.dialUpstreams
	}
	hookRunner, err := a.newHooks(cfg)
	if err != nil {
		return nil, err
	}
	pcfg := proxy.Config{
		Hooks:                 hookRunner,
		Grants:                a.parking.grants(),
		Listings:              a.parking.listings(),
		GrantKey:              proxy.GrantKey([]byte(cfg.Approvals.Secret.Reveal())),
		SealKeys:              sealKeys(cfg),
		TracerProvider:        a.tracing.provider,
		Propagator:            a.tracing.propagator,
		Upstreams:             ups,
		Decider:               a.engine,
		Auth:                  a.auth,
		MaxBodyBytes:          cfg.Limits.MaxBodyBytes.Int64(),
		MaxBodyBytesTotal:     cfg.Limits.MaxBodyBytesTotal.Int64(),
		Mode:                  cfg.Policy.Mode,
		SubjectModes:          cfg.Policy.SubjectModes,
		Logger:                log,
		Metrics:               proxy.NewMetrics(a.registry),
		DecisionLog:           a.dlog.forProxy(),
		Pending:               a.parking.store,
		Hold:                  cfg.Pending.Hold.Std(),
		MaxHeldPerSubject:     cfg.Limits.MaxHeldPerSubject,
		MaxForwardsPerSubject: cfg.Limits.MaxForwardsPerSubject,
		TTL:                   cfg.Pending.TTL.Std(),
		MaxResultBytes:        cfg.Pending.MaxResultBytes.Int64(),
		ProxyPublicURL:        cfg.ProxyPublicURL,
		ConfirmURL:            a.parking.confirmURL,
		OnPark:                a.parking.parked,
		OnResolve:             a.parking.resolved,
		Handoff:               a.parking.handoff,

		// What a request body may be (docs/configuration.md#limits).
		BodyTimeout:       cfg.Limits.BodyTimeout.Std(),
		AllowLossyNumbers: cfg.Limits.LossyNumbers == "allow",
	}
	if mh := cfg.Policy.ModeHeader; mh != nil {
		pcfg.ModeHeader, pcfg.ModeHeaderSubjects = mh.Name, mh.TrustedSubjects
	}
	if a.proxy, err = proxy.New(pcfg); err != nil {
		return nil, err
	}
	a.ready.Store(true)
	return a, nil
}

// approvalSecrets is approvals.secret, then approvals.previous_secrets:
// what signs (the first) and what is still believed (all), for links and
// for the seals of parked calls and grants alike.
func approvalSecrets(cfg *config.Config) [][]byte {
	secrets := [][]byte{[]byte(cfg.Approvals.Secret.Reveal())}
	for _, p := range cfg.Approvals.PreviousSecrets {
		secrets = append(secrets, []byte(p.Reveal()))
	}
	return secrets
}

// sealKeys seal the calls this replica parks and accept those parked under
// the approvals secret or one before it, as links signed with those still
// open: rotating the secret does not refuse the calls parked and approved
// meanwhile.
func sealKeys(cfg *config.Config) [][]byte { return derived(approvalSecrets(cfg), proxy.SealKey) }

// derived is the key that key derives from each secret, in order.
func derived(secrets [][]byte, key func(secret []byte) []byte) [][]byte {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = key(s)
	}
	return keys
}

// proxyUpstreams is the configuration's upstreams as the proxy takes them.

func proxyUpstreams(cfg *config.Config) ([]proxy.Upstream, error) {
	ups := make([]proxy.Upstream, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		pu, err := url.Parse(u.URL)
		if err != nil {
			return nil, fmt.Errorf("upstreams: %s: %w", u.Name, err)
		}
		ups = append(ups, proxy.Upstream{
			Name: u.Name, URL: pu, Protocol: u.Protocol, Prefix: u.Prefix, MCPPath: u.MCPPath,
			TargetArgs: u.TargetArgs, Timeout: u.Timeout.Std(),
			ToolQuery: u.ToolQuery, TargetFold: u.TargetFold, StripHeaders: u.StripHeaders,
			Mode: u.Mode, DryRun: !cfg.Enforcing(u),
		})
	}
	return ups, nil
}

// policyMetrics registers the build and policy series. reloaded records a
// policy reload in them and in /readyz; inForce sets the revision in force.
func (a *app) policyMetrics() (reloaded func(rev string, err error), inForce func(rev string)) {
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "toolgate_build_info", Help: "Build of this toolgate; always 1."},
		[]string{"version", "commit", "opa_version", "go_version"})
	build.WithLabelValues(version, commit, opaversion.Version, runtime.Version()).Set(1)
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_policy_reloads_total",
		Help: "Policy reloads by result (success, failure); a failure keeps the last good policy.",
	}, []string{"result"})
	reloads.WithLabelValues("success")
	reloads.WithLabelValues("failure")
	// One series at a time: the revision in force, so replicas running
	// different policies show up side by side.
	revision := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_policy_revision_info",
		Help: "The policy revision in force (a digest of every module, data file and the rules table); always 1.",
	}, []string{"revision"})
	a.registry.MustRegister(build, reloads, revision)
	var current string
	setRevision := func(rev string) { // under reloadMu
		if rev == current {
			return
		}
		// The new series first: a scrape in between sees two, never none.
		revision.WithLabelValues(rev).Set(1)
		revision.DeleteLabelValues(current)
		current = rev
	}
	reloaded = func(rev string, err error) {
		a.reloadMu.Lock()
		a.lastErr = err
		setRevision(rev)
		a.reloadMu.Unlock()
		if err != nil {
			reloads.WithLabelValues("failure").Inc()
			return
		}
		reloads.WithLabelValues("success").Inc()
	}
	inForce = func(rev string) {
		a.reloadMu.Lock()
		setRevision(rev)
		a.reloadMu.Unlock()
	}
	return reloaded, inForce
}

// readiness is what /readyz reports.
func (a *app) readiness() (bool, map[string]any) {
	a.reloadMu.Lock()
	lastErr := a.lastErr
	a.reloadMu.Unlock()
	pol := map[string]any{"ok": true, "revision": a.engine.Revision()}
	if lastErr != nil {
		pol["last_reload_error"] = lastErr.Error()
	}
	if err := a.engine.Misshapen(); err != nil {
		// Ready still: the policy is in force, and denies what these
		// rules reach.
		pol["misshapen_rules"] = err.Error()
	}
	store := storeCheck(a.parking.store)
	if a.settings != nil {
		a.settings.report(store)
	}
	ready := a.ready.Load()
	checks := map[string]any{"policy": pol, "store": store, "shutting_down": !ready}
	if a.cfg.Pending.FailReadiness && store["ok"] != true {
		ready = false // pending.fail_readiness: no calls to a replica that cannot park
	}
	return ready, checks
}

// listeners are the three bound sockets.
type listeners struct{ proxy, approvals, admin net.Listener }

// listen binds the listeners cfg names; approvals, when not nil, is the
// approvals listener bound already. On an error every listener, approvals
// too, is closed.
func listen(cfg *config.Config, approvals net.Listener) (*listeners, error) {
	l := &listeners{approvals: approvals}
	for _, b := range []struct {
		key, addr string
		ln        *net.Listener
	}{{"listen.proxy", cfg.Listen.Proxy, &l.proxy}, {"listen.approvals", cfg.Listen.Approvals, &l.approvals}, {"listen.admin", cfg.Listen.Admin, &l.admin}} {
		if *b.ln != nil {
			continue
		}
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("%s: %w", b.key, err)
		}
		*b.ln = ln
	}
	return l, nil
}

// close closes the listeners that are open, for a start that goes no
// further.
func (l *listeners) close() {
	for _, ln := range []net.Listener{l.proxy, l.approvals, l.admin} {
		if ln != nil {
			ln.Close()
		}
	}
}

// serve runs the three servers until ctx ends, then shuts them down
// gracefully: readiness turns 503 and new calls are refused at once, then
// the servers drain within the configured grace period. It only serves:
// what the app opened stays open until Close.
func (a *app) serve(ctx context.Context, l *listeners) error {
	a.log.Info("toolgate listening", "proxy", l.proxy.Addr().String(), "approvals", l.approvals.Addr().String(),
		"admin", l.admin.Addr().String(), "policy_revision", a.engine.Revision(), "version", version)
	limits := newConnLimits(a.log, a.registry)
	lns := []net.Listener{l.proxy, l.approvals, l.admin}
	newServer := func(i int, name string, h http.Handler, maxConns, perSource, maxHeader int) *http.Server {
		// No WriteTimeout: answers stream and held calls wait. Slow
		// clients are bounded by ReadHeaderTimeout, the body limit, the
		// connection cap, and writeProgress for each write of an answer.
		srv := &http.Server{
			Handler: deadline.Writes(h, writeProgress), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			MaxHeaderBytes: maxHeader, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		}
		lns[i] = limits.apply(name, lns[i], srv, maxConns, perSource)
		return srv
	}
	maxConns, perSource := a.cfg.Limits.MaxConnections, a.cfg.Limits.MaxConnectionsPerSource
	servers := []*http.Server{
		newServer(0, "proxy", a.proxy.Handler(), maxConns, perSource, maxHeaderBytes),
		// Approvers often come through an ingress, and probes and scrapes
		// from the node: one source each, which a cap per source would
		// refuse together. Each listener's own cap bounds them.
		newServer(1, "approvals", deadline.Body(a.parking.handler, a.cfg.Limits.BodyTimeout.Std()), maxConns, 0, maxHeaderBytes),
		// Probes and scrapes: a few connections and short headers, so
		// that the admin port adds little to what the cap lets the
		// other two hold.
		// No credentials here, and probes must keep answering: a body
		// sent to a probe is no reason to hold a connection (deadline.Body).
		newServer(2, "admin", deadline.Body(adminHandler(a.readiness, a.registry), a.cfg.Limits.BodyTimeout.Std()), min(maxConns, adminMaxConnections), adminMaxPerSource, adminMaxHeaderBytes),
	}
	// Garbage collection paced for a small live heap (internal/gctune);
	// GOGC in the environment turns this off. The heap is bounded by the
	// container's memory limit.
	if limit, err := gctune.MemoryLimit(); err != nil {
		a.log.Warn("cannot read the container's memory limit: the heap is not bounded by it (set GOMEMLIMIT)", "error", err)
	} else if limit > 0 {
		a.log.Info("heap bounded by the memory limit", "gomemlimit_bytes", limit)
	}
	defer gctune.Start(gctune.DefaultFloor).Stop()
	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() {
			if err := s.Serve(lns[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	// The sweeper, the re-announcer and the policy watcher stop before
	// serve returns, and so before Close closes the store, however serve
	// ends (a failed listener does not cancel ctx).
	bgCtx, stopBg := context.WithCancel(ctx)
	defer stopBg()
	var bg sync.WaitGroup
	if a.cfg.Policy.Watching() {
		dirs := []string{}
		if a.cfg.Policy.Dir != "" {
			dirs = append(dirs, a.cfg.Policy.Dir)
		}
		if a.cfg.Policy.RulesFile != "" {
			dirs = append(dirs, filepath.Dir(a.cfg.Policy.RulesFile))
		}
		if len(dirs) > 0 {
			bg.Go(func() {
				if err := a.engine.Watch(bgCtx, dirs, 200*time.Millisecond); err != nil && bgCtx.Err() == nil {
					a.log.Error("policy watcher stopped; policy changes are no longer picked up", "error", err)
				}
			})
		}
	}
	bg.Go(func() { a.proxy.Sweep(bgCtx, time.Second, 3*time.Second) })
	bg.Go(func() { a.parking.reannounce(bgCtx, reannounceEvery, reannounceAfter) })
	if a.settings != nil {
		bg.Go(func() { a.settings.watch(bgCtx) })
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	a.shutdown(servers, stopBg, &bg)
	return runErr
}

// shutdown drains and stops what serve started, within shutdown_grace:
// readiness and new calls answer 503, the calls in flight finish, the
// listeners close (the admin listener last), the parked calls' work is
// settled, and the background work stops.
func (a *app) shutdown(servers []*http.Server, stopBg context.CancelFunc, bg *sync.WaitGroup) {
	a.ready.Store(false)
	a.proxy.Drain()
	grace := a.cfg.ShutdownGrace.Std()
	a.log.Info("shutting down", "grace", grace.String())
	// The grace bounds the whole shutdown: the calls in flight have it
	// less what closing (the last log events, spans, notifications) is
	// kept, and closing must end with it (closeBy).
	a.closeBy = time.Now().Add(grace)
	sctx, cancel := context.WithDeadline(context.Background(), a.closeBy.Add(-closeReserve(grace)))
	defer cancel()
	// The listeners stay open while the calls in flight finish: meanwhile
	// readiness answers 503, and so does a new call (which a load balancer
	// not yet told may still send), rather than a refused connection.
	a.proxy.WaitIdle(sctx)
	shutdown := func(servers ...*http.Server) {
		var wg sync.WaitGroup
		for _, s := range servers {
			wg.Go(func() {
				if err := s.Shutdown(sctx); err != nil {
					a.log.Warn("forced shutdown", "error", err)
					_ = s.Close()
				}
			})
		}
		wg.Wait()
	}
	shutdown(servers[0], servers[1])
	// No request is held and no decision can come any more: what this
	// process still owes the parked calls is done now. The memory store
	// goes with the process, so its approved calls run now or never.
	if !a.proxy.Settle(sctx, a.cfg.Pending.Store == "memory") {
		a.log.Warn("approved calls still running or waiting to run at shutdown")
	}
	// The admin listener last: readiness says 503 until the end.
	shutdown(servers[2])
	stopBg()
	bgDone := make(chan struct{})
	go func() { bg.Wait(); close(bgDone) }()
	select {
	case <-bgDone:
	case <-sctx.Done():
		// A call the sweeper is sending outlasts the grace period; its
		// lease lets another replica settle it as unknown.
		a.log.Warn("sweeper still sending an approved call at shutdown")
	}
}

// closeReserve is the part of the shutdown grace kept for closing, after
// the calls in flight had the rest.
func closeReserve(grace time.Duration) time.Duration { return min(grace/5, 5*time.Second) }

// newLogger is the JSON logger on stderr at the configured level.
func newLogger(e env, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	out := &lineWriter{w: e.stderr}
	return slog.New(logHandler{slog.NewJSONHandler(out, &slog.HandlerOptions{Level: lv}), out})
}

// logHandler is the process's JSON log handler, with the writer it writes
// to: the decision log writes its events to that writer directly, as
// lines the handler would write (decisionlog.Options.ConsoleWriter).
type logHandler struct {
	slog.Handler
	out *lineWriter
}

// lineWriter passes each Write on whole, one at a time: the handler and
// the decision log both write one line per Write, so no two interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
