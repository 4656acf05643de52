// Package approvals is the approvals listener: where humans (through signed
// links, the inbox and Slack) and bots (through the JSON API) decide parked
// calls (docs/http-api.md, approvals listener; docs/approvers.md).
//
// It decides calls only through [pending.Store.Decide], or Config.Decide
// (toolgate's lifecycle.Handoff, which may claim an approved call for the
// request held on this replica in the same step), so the store's "first
// decision wins" and its count of approvals are the only arbiters; it never
// forwards anything (the replica holding the agent, or a sweeper, runs an
// approved call). GET and HEAD never change state: link
// previewers and mail scanners fetch every link they see (docs/security.md,
// INV-6).
//
// Authority. Without Config.Identity, an approval link is authorised by
// its token alone and carries no identity: link decisions are recorded as
// decided_by "link", and calls whose ask reasons name their approvers can
// be decided only through the API. With Config.Identity, every page
// decision needs a known approver as well (the link token, or for a
// signed-in approver the form's token, binds the page to one call), is
// recorded under the approver's name, and is checked against the
// approvers the call's reasons name. The API knows its caller by bearer
// key. Nobody approves their own call.
package approvals

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/pending"
)

// Approver is an approver known by name. With a Key, the key authenticates
// the JSON API as Name; without one, the entry only gives Name's Groups to
// an approver known otherwise (Config.Identity, a Slack user). A Name
// equal to a call's subject cannot approve that call.
type Approver struct {
	Name, Key string
	Groups    []string
}

// Config configures a Handler. Store and Signer are required.
type Config struct {
	Store     pending.Store
	Signer    *Signer
	Approvers []Approver // bearer keys for the JSON API, and approvers' groups; no key: the API answers 401
	// Identity, if set, tells who an approver on the pages is: every page
	// decision then needs one, and GET /approvals is their inbox.
	Identity signin.Authenticator
	// RequesterSignIn makes a confirmation page (and its form) need the
	// requester signed in through Identity: an approver whose name is the
	// call's subject. The link's token alone then confirms nothing, so an
	// agent that fetches its own link cannot confirm its own call.
	RequesterSignIn bool
	// Grants, if set, keeps "approve and remember" grants (the store of
	// parked calls); nil: approvals are once only.
	Grants pending.Grants
	// PublicURL is the approvals listener as browsers see it (scheme and
	// host). Its origin is trusted for form posts even when a proxy in front
	// rewrites Host.
	PublicURL string
	// Logger receives one audit record per decision (msg "approval"),
	// unless Audit is set, and a record per refused request. Default:
	// slog.Default().
	Logger *slog.Logger
	// Audit, if set, receives the audit record of every decision instead
	// of Logger (toolgate puts it in the decision log). It runs on the
	// request's goroutine: it must not block.
	Audit func(context.Context, AuditRecord)
	// Now is the clock for token expiry and "time left". Default: time.Now.
	Now func() time.Time
	// OnDecision is called after a successful decision (for the "resolved"
	// notification and metrics), with the call as decided. It runs on the
	// request's goroutine: it must not block.
	OnDecision func(c pending.Call)
	// Decide, if set, records decisions instead of Store.Decide, with the
	// same contract: toolgate's hands a call approved here to its request
	// held on this replica (lifecycle.Handoff).
	Decide func(ctx context.Context, id string, d pending.Decision) (pending.Call, error)
}

// Handler serves the approvals listener. It is safe for concurrent use.
type Handler struct {
	store    pending.Store
	signer   *Signer
	keys     []approverKey
	groups   map[string][]string // every Approvers entry's groups, by lower-cased name
	identity signin.Authenticator
	// requesterSignIn: Config.RequesterSignIn.
	requesterSignIn bool
	grants          pending.Grants
	log             *slog.Logger
	now             func() time.Time
	onDecision      func(pending.Call)
	record          func(context.Context, string, pending.Decision) (pending.Call, error)
	auditTo         func(context.Context, AuditRecord)
	csrf            *http.CrossOriginProtection
	pages           *template.Template
	router          http.Handler
}

// approverKey keeps the SHA-256 of a key: comparing fixed-length digests
// in constant time leaks neither the key nor its length.
type approverKey struct {
	name   string
	sum    [sha256.Size]byte
	groups []string
}

// New checks cfg and returns the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("approvals: no store")
	}
	if cfg.Signer == nil {
		return nil, errors.New("approvals: no signer")
	}
	h := &Handler{
		store: cfg.Store, signer: cfg.Signer, log: cfg.Logger, now: cfg.Now, onDecision: cfg.OnDecision,
		auditTo: cfg.Audit, csrf: http.NewCrossOriginProtection(), groups: map[string][]string{},
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.record = cfg.Decide; h.record == nil {
		h.record = cfg.Store.Decide
	}
	if h.now == nil {
		h.now = time.Now
	}
	if err := h.addApprovers(cfg.Approvers); err != nil {
		return nil, err
	}
	h.identity, h.grants = cfg.Identity, cfg.Grants
	if cfg.RequesterSignIn && cfg.Identity == nil {
		return nil, errors.New("approvals: RequesterSignIn needs an Identity to sign the requester in")
	}
	h.requesterSignIn = cfg.RequesterSignIn
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("approvals: public URL %q is not an http(s) URL", cfg.PublicURL)
		}
		if err := h.csrf.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("approvals: public URL: %w", err)
		}
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h.pages = pages
	h.router = h.routes()
	return h, nil
}

// ServeHTTP serves the approvals listener.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.router.ServeHTTP(w, r)
}

// routes lists every route of the listener.
func (h *Handler) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders(h.formAction()), middleware.Recoverer)

	// Approval links and the inbox, for people: HTML.
	r.Get("/approvals", h.page(h.showInbox))
	r.Head("/approvals", h.page(h.showInbox))
	r.Get("/approvals/{id}", h.page(h.showPage))
	r.Head("/approvals/{id}", h.page(h.showPage))
	r.Post("/approvals/{id}", h.page(h.decideByLink))
	// The requester's confirmation page (confirm.go).
	r.Get("/confirm/{id}", h.pageVia(viaRequester, h.showConfirm))
	r.Head("/confirm/{id}", h.pageVia(viaRequester, h.showConfirm))
	r.Post("/confirm/{id}", h.pageVia(viaRequester, h.decideConfirm))

	// The API, for bots and scripts: JSON, bearer keys.
	r.Get("/api/approvals", h.api(h.listCalls))
	r.Get("/api/approvals/{id}", h.api(h.showCall))
	r.Post("/api/approvals/{id}", h.api(h.decideByAPI))
	r.Get("/api/grants", h.api(h.listGrants))
	r.Delete("/api/grants/{id}", h.api(h.revokeGrant))

	if h.identity != nil {
		if auth := h.identity.Routes(); auth != nil {
			r.Mount("/auth", auth)
		}
	}

	// A wrong method keeps chi's 405, which lists the allowed methods.
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		a := classify(errNoRoute, r.Method)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			h.writeAPIError(w, a)
			return
		}
		h.writeErrorPage(w, a)
	})
	return r
}

// formAction is where the pages' forms may go: the listener itself, and
// the origins the sign-out form's answer redirects to (browsers check
// form-action on a form's redirects too).
func (h *Handler) formAction() string {
	var fa strings.Builder
	fa.WriteString("'self'")
	if h.identity != nil {
		for _, o := range h.identity.LogoutOrigins() {
			fa.WriteString(" " + o)
		}
	}
	return fa.String()
}

// securityHeaders go on every answer, errors included. The token travels in
// the URL, so no referrer may carry it away and no cache may keep the page;
// the page runs no script and may not be framed (clickjacking); its forms
// go to formAction only.
func securityHeaders(formAction string) func(http.Handler) http.Handler {
	csp := "default-src 'none'; style-src 'unsafe-inline'; form-action " + formAction + "; frame-ancestors 'none'"
	headers := []struct {
		name  string // in canonical form, as Set would store it
		value []string
	}{
		{"Content-Security-Policy", []string{csp}},
		{"X-Frame-Options", []string{"DENY"}},
		{"Referrer-Policy", []string{"no-referrer"}},
		{"Cache-Control", []string{"no-store"}},
		{"X-Content-Type-Options", []string{"nosniff"}},
		{"X-Robots-Tag", []string{"noindex, nofollow"}},
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hd := w.Header()
			for _, h := range headers {
				hd[h.name] = h.value
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Every answer shares the value slices of the headers its handlers always
// send (securityHeaders, jsonType) rather than allocating its own: no code
// writes a header's values in place (Set and Del replace the slice, and
// net/http clones the map before it adds its own), and a slice with no
// room past its one value is copied by an Add.
var jsonType = []string{"application/json"}
