package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Response headers on every answer about a call.
const (
	headerCallID   = "X-Toolgate-Call-Id"
	headerDecision = "X-Toolgate-Decision"
)

// problem is an RFC 9457 problem body with toolgate's fields.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	CallID   string   `json:"call_id"`
	Decision string   `json:"decision"`
	Reasons  []string `json:"reasons"`
	RuleIDs  []string `json:"rule_ids"`
}

// problemOf is a's problem body. Reasons and rule IDs are never null:
// clients iterate them.
func problemOf(a answer) problem {
	p := problem{
		Type: problemType(a.outcome, a.status), Title: a.title, Status: a.status, Detail: a.detail,
		CallID: a.callID, Decision: a.outcome, Reasons: nonNil(a.reasons), RuleIDs: nonNil(a.ruleIDs),
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	return p
}

// problemType names each kind of problem with a stable URN.
func problemType(outcome string, status int) string {
	switch outcome {
	case outcomeInvalid:
		switch status {
		case http.StatusRequestEntityTooLarge:
			return "urn:toolgate:problem:too-large"
		case http.StatusUnsupportedMediaType:
			return "urn:toolgate:problem:unsupported-media-type"
		case http.StatusNotFound:
			return "urn:toolgate:problem:no-route"
		}
		return "urn:toolgate:problem:invalid-request"
	case outcomeDeny:
		return "urn:toolgate:problem:denied"
	case outcomeAsk:
		if status == http.StatusTooManyRequests {
			return "urn:toolgate:problem:too-many-parked"
		}
		return "urn:toolgate:problem:approval-unavailable"
	case outcomeUnauthenticated:
		return "urn:toolgate:problem:unauthenticated"
	case outcomeUnavailable:
		return "urn:toolgate:problem:unavailable"
	case outcomeAllow, outcomeApproved:
		return "urn:toolgate:problem:upstream-failed"
	}
	return "about:blank"
}

// writeProblem writes p with its headers.
func writeProblem(w http.ResponseWriter, p problem) {
	body, err := json.Marshal(p)
	if err != nil { // unreachable: only strings and ints
		body = []byte(`{"title":"internal error"}`)
	}
	h := w.Header()
	h.Set(headerCallID, p.CallID)
	h.Set(headerDecision, p.Decision)
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
