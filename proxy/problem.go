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

// Outcome labels of problem bodies and of X-Toolgate-Decision (SPEC.md §4.2).
const (
	outcomeDeny            = "deny"
	outcomeAsk             = "ask"
	outcomeAllow           = "allow"
	outcomeInvalid         = "invalid"
	outcomeUnauthenticated = "unauthenticated"
	outcomeUnavailable     = "unavailable"
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

// callError is a refusal toolgate answers itself. It is the one type that
// carries a status, so statuses are chosen where the error is found and
// written in exactly one place (writeProblem).
type callError struct {
	Status  int
	Outcome string
	Title   string
	Detail  string
	// RPCCode, when set, answers the refusal as a JSON-RPC error (a
	// message to an MCP upstream) instead of a problem body.
	RPCCode int
}

func (e *callError) Error() string { return e.Title + ": " + e.Detail }

func invalid(status int, title, detail string) *callError {
	return &callError{Status: status, Outcome: outcomeInvalid, Title: title, Detail: detail}
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
		return "urn:toolgate:problem:approval-unavailable"
	case outcomeUnauthenticated:
		return "urn:toolgate:problem:unauthenticated"
	case outcomeUnavailable:
		return "urn:toolgate:problem:unavailable"
	case outcomeAllow:
		return "urn:toolgate:problem:upstream-failed"
	}
	return "about:blank"
}

// writeProblem writes p with its headers. Reasons and rule IDs are never
// null in the body: clients iterate them.
func writeProblem(w http.ResponseWriter, p problem) {
	if p.Reasons == nil {
		p.Reasons = []string{}
	}
	if p.RuleIDs == nil {
		p.RuleIDs = []string{}
	}
	if p.Type == "" {
		p.Type = problemType(p.Decision, p.Status)
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
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
