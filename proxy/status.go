package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// statusDoc is a parked call as its caller sees it (SPEC.md §4.3).
func statusDoc(pc pending.Call) map[string]any {
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
	if res := pc.Result; res != nil {
		r := map[string]any{"status": res.Status, "headers": res.Header}
		if ct := http.Header(res.Header).Get("Content-Type"); strings.Contains(ct, "json") && json.Valid(res.Body) && !res.Truncated {
			r["body"] = rawJSON(res.Body)
		} else {
			r["body"] = res.Body // base64
			r["body_encoding"] = "base64"
		}
		if res.Truncated {
			r["truncated"] = true
		}
		doc["result"] = r
	}
	return doc
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// serveStatus answers GET /_toolgate/calls/{id} (with ?wait= long-poll)
// and DELETE (cancel). Only the calling subject sees its calls; to anyone
// else they do not exist.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request, id string) {
	c := &call{id: id}
	if s.cfg.Pending == nil {
		s.refuse(w, r, c, invalid(http.StatusNotFound, "Unknown call", "this toolgate parks no calls"))
		return
	}
	subj, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		s.refuse(w, r, c, &callError{Status: http.StatusUnauthorized, Outcome: outcomeUnauthenticated, Title: "Unauthenticated", Detail: "missing or bad credentials"})
		return
	}
	pc, err := s.cfg.Pending.Get(r.Context(), id)
	if errors.Is(err, pending.ErrNotFound) || (err == nil && pc.Subject != subj.ID) {
		s.refuse(w, r, c, invalid(http.StatusNotFound, "Unknown call", "no call with this ID is yours"))
		return
	}
	if err != nil {
		s.storeFailed(w, nil, pending.Call{ID: id}, err)
		return
	}
	switch r.Method {
	case http.MethodDelete:
		pc, err = s.cfg.Pending.Cancel(r.Context(), id)
		if err != nil && !errors.Is(err, pending.ErrConflict) {
			s.storeFailed(w, nil, pc, err)
			return
		}
		if err == nil && s.cfg.OnResolve != nil {
			s.cfg.OnResolve(pc)
		}
		pc = conflictCall(err, pc)
		status := http.StatusOK
		if err != nil {
			status = http.StatusConflict
		}
		writeJSON(w, status, statusDoc(pc))
		return
	case http.MethodGet, http.MethodHead:
	default:
		w.Header().Set("Allow", "GET, HEAD, DELETE")
		s.refuse(w, r, c, invalid(http.StatusMethodNotAllowed, "Method not allowed", "use GET to follow a call, DELETE to cancel it"))
		return
	}
	if wait, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && wait > 0 && !pc.State.Terminal() {
		if max := s.cfg.Hold; wait > max {
			wait = max
		}
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		stop := context.AfterFunc(s.drained, cancel) // shutdown answers long polls at once
		next, werr := s.cfg.Pending.Wait(ctx, id, pc.State)
		stop()
		cancel()
		if werr == nil || next.ID != "" {
			pc = next
		}
	}
	if r.Method == http.MethodGet && (pc.State == pending.Executed || pc.State == pending.Failed || pc.State == pending.Unknown) {
		// A status poll is one of the ways the result reaches its caller.
		_, _, _ = s.cfg.Pending.Deliver(r.Context(), id)
	}
	w.Header().Set(headerCallID, pc.ID)
	writeJSON(w, http.StatusOK, statusDoc(pc))
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
