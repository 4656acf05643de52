package approvals

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// Scopes of a remembered grant (docs/policy.md, remembered grants).
const (
	scopeTarget = "subject+tool+target" // this caller, this tool, this target
	scopeTool   = "subject+tool"        // this caller, this tool, any target
)

// remember is "approve and remember": the scope and lifetime of the grant
// an approval leaves behind.
type remember struct {
	Scope    string `json:"scope"`
	Lifetime string `json:"lifetime"`
}

// grantLifetimes are the lifetimes the page offers; the API takes any
// duration up to pending.MaxGrantLifetime.
var grantLifetimes = []string{"1h", "8h", "24h", "168h"}

// checkRemember reads a remember request for call c, before anything is
// decided: a bad one refuses the whole decision.
func (h *Handler) checkRemember(rm *remember, c pending.Call, info callinfo.Info, to pending.State) (time.Duration, error) {
	if rm == nil {
		return 0, nil
	}
	switch {
	case h.grants == nil:
		return 0, badRequest("this toolgate keeps no grants: approve once")
	case to != pending.Approved:
		return 0, badRequest(`"remember" goes with an approval`)
	case len(info.Approvers) > 0:
		// A grant would let later calls past the approvers or the quorum
		// this one needs.
		return 0, badRequest("this call names its approvers: it can be approved only once")
	case info.HookAsked:
		// A hook's ask is live state; no grant answers it later.
		return 0, badRequest("a hook asked for this call: it can be approved only once")
	case info.MustAsk:
		// Nothing automatic answers such an ask: a grant would.
		return 0, badRequest("a rule says this call must be asked about (must_ask): it can be approved only once")
	case !grantable(c):
		return 0, badRequest("only a tool call of a known principal can be remembered: approve once")
	case rm.Scope != scopeTarget && rm.Scope != scopeTool:
		return 0, badRequest(`remember.scope must be "` + scopeTarget + `" or "` + scopeTool + `"`)
	case rm.Scope == scopeTarget && info.TargetsBeyond:
		// A grant names one target; this call acts on more, so a grant for
		// its target would cover calls it is not.
		return 0, badRequest(`this call's targets are more than its target (another target argument, an array, or a value toolgate cannot read as a path): remember it for the tool ("` + scopeTool + `"), or approve once`)
	case rm.Scope == scopeTarget && info.Target == "":
		// A grant for "no target" would stand for every call of the tool.
		return 0, badRequest(`this call names no target: remember it for the tool ("` + scopeTool + `"), or approve once`)
	}
	d, err := time.ParseDuration(rm.Lifetime)
	if err != nil || d <= 0 || d > pending.MaxGrantLifetime {
		return 0, badRequest("remember.lifetime must be a duration such as 8h, at most " + pending.MaxGrantLifetime.String())
	}
	return d, nil
}

// grantable reports whether a grant can name c: a grant is for one
// principal's calls of one tool (pending.Grant), so a plain HTTP call, or
// one without a known principal, is approved once. Callers without
// credentials (identity.anonymous) share one principal: a grant for it
// would cover everyone who reaches the proxy.
func grantable(c pending.Call) bool {
	return c.Principal != "" && c.Principal != identity.AnonymousPrincipal && c.Tool != ""
}

// grant records the grant an approval asked for. The call is approved
// already: a grant that cannot be stored is reported, the approval stands.
func (h *Handler) grant(ctx context.Context, c pending.Call, info callinfo.Info, who string, rm *remember, life time.Duration) (*pending.Grant, error) {
	g := pending.Grant{
		Subject: c.Principal, Upstream: c.Upstream, Tool: c.Tool, Target: info.Target,
		AnyTarget: rm.Scope == scopeTool, Extras: info.GrantExtras, Approver: who, CallID: c.ID,
	}
	if g.AnyTarget {
		g.Target = ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), decideTimeout)
	defer cancel()
	stored, err := h.grants.Grant(ctx, g, life)
	if err != nil {
		h.log.Error("an approved call's grant was not stored", "call_id", c.ID, "error", err)
		return nil, err
	}
	// The target by its length only: it may hold a secret (a command's
	// token, a URL's key), and the decision log's masks do not reach
	// this log. The grant's ID finds it through the API.
	h.log.Info("grant", "grant_id", stored.ID, "call_id", c.ID, "approver", who, "subject", g.Subject,
		"upstream", g.Upstream, "tool", g.Tool, "target_bytes", len(g.Target), "any_target", g.AnyTarget, "expires_at", stored.ExpiresAt)
	return &stored, nil
}

// grantJSON is a grant as the API shows it.
type grantJSON struct {
	ID       string `json:"grant_id"`
	Subject  string `json:"subject"`
	Upstream string `json:"upstream"`
	Tool     string `json:"tool"`
	Target   string `json:"target,omitempty"`
	Scope    string `json:"scope"`
	// Covers says, in words, which calls in its scope it covers: a grant
	// is bound to the headers and params of the call it was made from.
	Covers    string `json:"covers"`
	Approver  string `json:"approver"`
	CallID    string `json:"call_id"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
	// Sealed, in the list, is false for a grant in the store that toolgate
	// did not make as it stands (written or changed there by something
	// else): it covers no call. Absent elsewhere, and where the store does
	// not seal grants.
	Sealed *bool `json:"sealed,omitempty"`
}

// sealChecker is a grant store that tells the grants toolgate made from
// the others (internal/grantseal).
type sealChecker interface{ Sealed(pending.Grant) bool }

func grantOf(g pending.Grant) grantJSON {
	scope := scopeTarget
	if g.AnyTarget {
		scope = scopeTool
	}
	return grantJSON{
		ID: g.ID, Subject: g.Subject, Upstream: g.Upstream, Tool: g.Tool, Target: g.Target, Scope: scope, Covers: grantCovers(g),
		Approver: g.Approver, CallID: g.CallID, CreatedAt: apiTime(g.CreatedAt), ExpiresAt: apiTime(g.ExpiresAt),
	}
}

// grantCovers says, for approvers, which calls in its scope a grant
// covers: the proxy compares a digest (pending.Grant.Extras) that nobody
// can read.
func grantCovers(g pending.Grant) string {
	if g.Extras == "" {
		return "calls in its scope that send no headers but the usual ones (User-Agent, Accept, …) and no other params"
	}
	return "calls in its scope that send the same headers and other params as call " + g.CallID + " (the usual headers, such as User-Agent, may differ)"
}

// listGrants serves GET /api/grants?limit=100: live grants, newest first.
func (h *Handler) listGrants(w http.ResponseWriter, r *http.Request, _ signin.Approver) error {
	if h.grants == nil {
		return errNoRoute
	}
	limit := defaultListLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListLimit {
			return badRequest("limit must be a number from 1 to 1000")
		}
		limit = n
	}
	gs, err := h.grants.Grants(r.Context(), limit)
	if err != nil {
		return err
	}
	sc, _ := h.grants.(sealChecker)
	out := make([]grantJSON, 0, len(gs))
	for _, g := range gs {
		gj := grantOf(g)
		if sc != nil {
			gj.Sealed = new(sc.Sealed(g))
		}
		out = append(out, gj)
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": out})
	return nil
}

// revokeGrant serves DELETE /api/grants/{id}: the grant stops applying at
// once, on every replica (the store is shared).
func (h *Handler) revokeGrant(w http.ResponseWriter, r *http.Request, who signin.Approver) error {
	if h.grants == nil {
		return errNoRoute
	}
	id := chi.URLParam(r, "id")
	if id == "" || len(id) > maxCallIDBytes {
		return errUnknownGrant
	}
	g, err := h.grants.Revoke(r.Context(), id)
	if errors.Is(err, pending.ErrNotFound) {
		return errUnknownGrant
	}
	if err != nil {
		return err
	}
	h.log.Info("grant revoked", "grant_id", g.ID, "by", who.Name, "subject", g.Subject, "tool", g.Tool)
	writeJSON(w, http.StatusOK, grantOf(g))
	return nil
}
