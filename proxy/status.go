package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// StatusURL is where an agent follows parked call id: /_toolgate/calls/{id}
// on the proxy listener, under base when base is set (the proxy listener
// as agents reach it, [Config.ProxyPublicURL], a path prefix included),
// else relative.
func StatusURL(base, id string) string {
	return strings.TrimSuffix(base, "/") + statusURL(id)
}

// statusURL is the path of call id's status on the proxy listener.
func statusURL(id string) string { return "/_toolgate/calls/" + id }

// serveStatus answers GET /_toolgate/calls/{id} (with ?wait= long-poll)
// and DELETE (cancel). Only the calling subject sees its calls; to anyone
// else they do not exist.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request, id string) {
	c := &call{id: id, out: restResponder{}}
	a := s.status(r, id)
	if a.kind == refusal && a.outcome != outcomeUnavailable {
		s.refused(r, c, a)
	}
	s.respond(w, c, a)
}

// parseWait reads the long-poll's ?wait=: a Go duration (30s, 1m), or a
// number of seconds, as Prefer: wait=N counts them; none is 0.
func parseWait(v string) (time.Duration, bool) {
	if v == "" {
		return 0, true
	}
	if n, err := strconv.ParseUint(v, 10, 31); err == nil {
		return time.Duration(n) * time.Second, true
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d >= 0
}

func (s *Server) status(r *http.Request, id string) answer {
	if s.life == nil {
		return *invalid(http.StatusNotFound, "Unknown call", "this toolgate parks no calls")
	}
	subj, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		return unauthenticated("missing or bad credentials")
	}
	switch r.Method {
	case http.MethodDelete:
		pc, err := s.life.Cancel(r.Context(), subj.Principal, id)
		switch {
		case err == nil:
			return statusAnswer(http.StatusOK, pc)
		case errors.Is(err, pending.ErrConflict):
			return statusAnswer(http.StatusConflict, pc)
		}
		return storeFailed(err)
	case http.MethodGet, http.MethodHead:
	default:
		a := invalid(http.StatusMethodNotAllowed, "Method not allowed", "use GET to follow a call, DELETE to cancel it")
		a.allow = "GET, HEAD, DELETE"
		return *a
	}
	wait, ok := parseWait(r.URL.Query().Get("wait"))
	if !ok {
		return *invalid(http.StatusBadRequest, "Bad wait", "wait is a duration such as 30s, or a number of seconds")
	}
	wait, release := s.holdPlace(subj.Principal, min(wait, s.cfg.Hold))
	defer release()
	pc, err := s.life.Status(r.Context(), subj.Principal, id, wait, r.Method == http.MethodGet)
	if err != nil {
		return storeFailed(err)
	}
	return statusAnswer(http.StatusOK, pc)
}

// statusAnswer is a parked call as its caller sees it.
func statusAnswer(status int, pc pending.Call) answer {
	info := infoOf(pc)
	doc := map[string]any{
		"call_id":    pc.ID,
		"status":     string(pc.State),
		"tool":       info.Tool,
		"upstream":   pc.Upstream,
		"decision":   map[string]any{"action": outcomeAsk, "reasons": nonNil(info.Reasons), "rule_ids": nonNil(info.RuleIDs)},
		"decided_by": pc.DecidedBy,
		"expires_at": pc.ExpiresAt.UTC().Format(time.RFC3339),
	}
	if pc.Comment != "" {
		doc["comment"] = pc.Comment
	}
	if len(pc.Quorum) > 0 {
		// A call that takes several approvers shows who has approved so far.
		approvals := make([]map[string]any, 0, len(pc.Approvals))
		for _, a := range pc.Approvals {
			approvals = append(approvals, map[string]any{"by": a.By, "at": a.At.UTC().Format(time.RFC3339), "comment": a.Comment})
		}
		doc["approvals"] = approvals
		doc["approvals_needed"] = pc.Quorum
	}
	if res := pc.Result; res != nil {
		r := map[string]any{"status": res.Status, "headers": shownHeader(res.Header)}
		if ct := http.Header(res.Header).Get("Content-Type"); strings.Contains(ct, "json") && json.Valid(res.Body) && !res.Truncated {
			r["body"] = json.RawMessage(res.Body)
		} else {
			r["body"] = res.Body // base64
			r["body_encoding"] = "base64"
		}
		if res.Truncated {
			r["truncated"] = true
		}
		doc["result"] = r
	}
	return answer{kind: document, status: status, callID: pc.ID, outcome: stateOutcome(pc.State), doc: doc}
}

// stateOutcome is the X-Toolgate-Decision of a status answer: what became
// of the ask so far, in the words toolgate's other answers use.
func stateOutcome(s pending.State) string {
	switch s {
	case pending.Waiting:
		return outcomeAsk
	case pending.Rejected:
		return outcomeRejected
	case pending.Expired:
		return outcomeExpired
	case pending.Cancelled:
		return outcomeCancelled
	}
	return outcomeApproved // approved, executing, executed, failed, unknown: a human approved it
}
