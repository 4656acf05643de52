package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// api adapts a handler of the JSON API: the approver is authenticated
// first, by bearer key, and a returned error becomes a JSON answer with
// the status classify gives it.
func (h *Handler) api(fn func(w http.ResponseWriter, r *http.Request, approver signin.Approver) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var err error = errUnauthenticated
		if who, ok := h.keyApprover(r); ok {
			err = fn(w, r, who)
		}
		if err != nil {
			a := classify(err, r.Method)
			h.logRefusal(r, a, err, viaAPI)
			h.writeAPIError(w, a)
		}
	}
}

// decisionAnswer is the answer to a decision, and to a late one (409).
type decisionAnswer struct {
	CallID    string `json:"call_id"`
	Status    string `json:"status"`
	DecidedBy string `json:"decided_by"`
	// Approvals and Progress show a call that takes several approvals:
	// after a partial approval Status is still "waiting".
	Approvals []approvalJSON `json:"approvals,omitempty"`
	Progress  string         `json:"progress,omitempty"`
	// Grant is the grant an "approve and remember" left behind.
	Grant *grantJSON `json:"grant,omitempty"`
	Error string     `json:"error,omitempty"`
}

// approvalJSON is one approval as the API shows it.
type approvalJSON struct {
	By      string `json:"by"`
	At      string `json:"at"`
	Comment string `json:"comment"`
}

func approvalsJSON(c pending.Call) []approvalJSON {
	out := make([]approvalJSON, 0, len(c.Approvals))
	for _, a := range c.Approvals {
		out = append(out, approvalJSON{By: a.By, At: apiTime(a.At), Comment: a.Comment})
	}
	return out
}

func answerOf(c pending.Call, info callinfo.Info) decisionAnswer {
	return decisionAnswer{
		CallID: c.ID, Status: string(c.State), DecidedBy: c.DecidedBy,
		Approvals: approvalsJSON(c), Progress: progress(c, info),
	}
}

// decideByAPI serves POST /api/approvals/{id}.
func (h *Handler) decideByAPI(w http.ResponseWriter, r *http.Request, who signin.Approver) error {
	id, err := callID(r)
	if err != nil {
		return err
	}
	// No Content-Type is required here, unlike the form: a browser cannot
	// send the Authorization header cross-site without a CORS preflight
	// this listener never grants, and `curl -d` sends a form type.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return err
		}
		return unreadable(err, "the request body could not be read")
	}
	req, err := parseDecisionRequest(body)
	if err != nil {
		return err
	}
	to, err := parseDecision(req.decision)
	if err != nil {
		return err
	}
	if err := checkComment(req.comment); err != nil {
		return err
	}
	// Peek: the decision checks the call as it stands, and the answer is
	// the call as decided, so the read may come from this replica's own
	// record of a call it parked (no round trip to Redis).
	c, err := h.store.Peek(r.Context(), id)
	if err != nil {
		return err
	}
	info := callinfo.Decode(c.Info)
	life, err := h.checkRemember(req.remember, c, info, to)
	if err != nil {
		return err
	}
	decided, err := h.decide(r.Context(), r.RemoteAddr, decision{call: c, info: info, who: &who, to: to, comment: req.comment, via: viaAPI})
	if err != nil {
		return err
	}
	ans := answerOf(decided, info) // a call's Info never changes once parked
	if req.remember != nil && decided.State == pending.Approved {
		if g, err := h.grant(r.Context(), decided, info, who.Name, req.remember, life); err == nil {
			gj := grantOf(*g)
			ans.Grant = &gj
		} else {
			ans.Error = "approved, but the grant was not stored (see toolgate's log)" // the store's error may name its addresses
		}
	}
	writeAnswer(w, http.StatusOK, &ans)
	return nil
}

type decisionRequest struct {
	decision, comment string
	remember          *remember
}

// parseDecisionRequest reads {"decision": "...", "comment": "..."}
// strictly: an unknown or repeated key, a value that is not a string,
// trailing data or invalid UTF-8 is refused rather than read one way
// (encoding/json alone keeps the last of two "decision" keys).
func parseDecisionRequest(body []byte) (decisionRequest, error) {
	if !utf8.Valid(body) {
		return decisionRequest{}, badDecisionRequest("the body is not valid UTF-8")
	}
	if req, ok := plainDecisionRequest(body); ok {
		return req, nil
	}
	return decodeDecisionRequest(body)
}

func badDecisionRequest(msg string) error {
	return badRequest(msg + `; send {"decision":"approve"|"reject","comment":"…"}`)
}

// decodeDecisionRequest is parseDecisionRequest of any UTF-8 body, token
// by token.
func decodeDecisionRequest(body []byte) (decisionRequest, error) {
	bad := func(msg string) (decisionRequest, error) { return decisionRequest{}, badDecisionRequest(msg) }
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad("the body is not a JSON object")
	}
	var req decisionRequest
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("the body is not valid JSON")
		}
		key, _ := tok.(string)
		if seen[key] {
			return bad("key " + strconv.Quote(key) + " appears twice")
		}
		seen[key] = true
		var v *string // null reads as absent
		switch key {
		case "decision", "comment":
			if err := dec.Decode(&v); err != nil {
				return bad(strconv.Quote(key) + " must be a string")
			}
		case "remember":
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req.remember); err != nil {
				return bad(`"remember" must be {"scope": "subject+tool+target" | "subject+tool", "lifetime": "8h"}`)
			}
			continue
		default:
			return bad("unknown key " + strconv.Quote(key))
		}
		if v != nil && key == "decision" {
			req.decision = *v
		} else if v != nil {
			req.comment = *v
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return bad("the body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("data after the JSON object")
	}
	return req, nil
}

// plainDecisionRequest reads the body every client sends, a JSON object of
// "decision" and "comment" strings without escapes, as
// parseDecisionRequest would, without a json.Decoder and its tokens. ok is
// false for any other body (another key, a repeated one, null, an escape,
// a remember): parseDecisionRequest reads it, and gives its error. body is
// valid UTF-8.
func plainDecisionRequest(body []byte) (req decisionRequest, ok bool) {
	i := skipJSONSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return decisionRequest{}, false
	}
	i = skipJSONSpace(body, i+1)
	var seenDecision, seenComment bool
	for first := true; ; first = false {
		if i < len(body) && body[i] == '}' && first {
			break
		}
		key, next, ok := plainJSONString(body, i)
		if !ok {
			return decisionRequest{}, false
		}
		if i = skipJSONSpace(body, next); i == len(body) || body[i] != ':' {
			return decisionRequest{}, false
		}
		v, next, ok := plainJSONString(body, skipJSONSpace(body, i+1))
		if !ok {
			return decisionRequest{}, false
		}
		// Compared and kept without a copy where it can be: the key, and
		// the decision when it is one of the two there are.
		switch {
		case string(key) == "decision" && !seenDecision:
			req.decision, seenDecision = decisionText(v), true
		case string(key) == "comment" && !seenComment:
			req.comment, seenComment = string(v), true
		default:
			return decisionRequest{}, false
		}
		if i = skipJSONSpace(body, next); i < len(body) && body[i] == ',' {
			i = skipJSONSpace(body, i+1)
			continue
		}
		if i == len(body) || body[i] != '}' {
			return decisionRequest{}, false
		}
		break
	}
	if skipJSONSpace(body, i+1) != len(body) {
		return decisionRequest{}, false
	}
	return req, true
}

// decisionText is v as a string, the constant when v is "approve" or
// "reject".
func decisionText(v []byte) string {
	switch string(v) {
	case "approve":
		return "approve"
	case "reject":
		return "reject"
	}
	return string(v)
}

// plainJSONString reads the JSON string at body[i] when it holds no
// escape and no control character: its text (body's bytes), and the
// offset past it.
func plainJSONString(body []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(body) || body[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(body); j++ {
		switch c := body[j]; {
		case c == '"':
			return body[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipJSONSpace returns the offset of the first byte at or after i that
// is not JSON whitespace.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// callSummary is one call in a list.
type callSummary struct {
	CallID    string `json:"call_id"`
	Status    string `json:"status"`
	Tool      string `json:"tool"`
	Upstream  string `json:"upstream"`
	Subject   string `json:"subject"`
	ExpiresAt string `json:"expires_at"`
	CreatedAt string `json:"created_at"`
	DecidedBy string `json:"decided_by"`
}

// callDetail is one call with what approvers see. The request bytes and
// any token stay out: the API lists calls, it does not hand out links.
type callDetail struct {
	callSummary
	DecidedAt string          `json:"decided_at,omitempty"`
	Comment   string          `json:"comment"`
	Approvals []approvalJSON  `json:"approvals"`
	Progress  string          `json:"progress,omitempty"`
	Info      json.RawMessage `json:"info"`
}

func summaryOf(c pending.Call) callSummary {
	return callSummary{
		CallID: c.ID, Status: string(c.State), Tool: c.Tool, Upstream: c.Upstream, Subject: c.Subject,
		ExpiresAt: apiTime(c.ExpiresAt), CreatedAt: apiTime(c.CreatedAt), DecidedBy: c.DecidedBy,
	}
}

func apiTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// listCalls serves GET /api/approvals?status=waiting&limit=100.
func (h *Handler) listCalls(w http.ResponseWriter, r *http.Request, _ signin.Approver) error {
	q := r.URL.Query()
	if len(q["status"]) > 1 || len(q["limit"]) > 1 {
		return badRequest("status and limit may be given once")
	}
	state := pending.Waiting
	if s := q.Get("status"); s != "" {
		state = pending.State(s)
		if !state.Valid() {
			return badRequest("unknown status " + strconv.Quote(s) +
				"; one of waiting, approved, executing, executed, rejected, expired, failed, unknown, cancelled")
		}
	}
	limit := defaultListLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListLimit {
			return badRequest("limit must be a number from 1 to 1000")
		}
		limit = n
	}
	calls, err := h.store.List(r.Context(), state, limit)
	if err != nil {
		return err
	}
	out := make([]callSummary, 0, len(calls))
	for _, c := range calls {
		out = append(out, summaryOf(c))
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": out})
	return nil
}

// showCall serves GET /api/approvals/{id}.
func (h *Handler) showCall(w http.ResponseWriter, r *http.Request, _ signin.Approver) error {
	id, err := callID(r)
	if err != nil {
		return err
	}
	c, err := h.store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	d := callDetail{
		callSummary: summaryOf(c), DecidedAt: apiTime(c.DecidedAt), Comment: c.Comment,
		Approvals: approvalsJSON(c), Progress: progress(c, callinfo.Decode(c.Info)), Info: json.RawMessage("null"),
	}
	if json.Valid(c.Info) {
		d.Info = c.Info
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// writeAPIError answers a refused API request. A 409 has the shape of a
// decision's answer, with the call as it now stands.
func (h *Handler) writeAPIError(w http.ResponseWriter, a answer) {
	if a.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate approvals"`)
	}
	if a.call != nil {
		status := a.call.State
		if status == pending.Waiting {
			status = pending.Expired // the store refused a waiting call: its expiry passed
		}
		ans := answerOf(*a.call, callinfo.Decode(a.call.Info))
		ans.Status, ans.Error = string(status), a.msg
		writeAnswer(w, a.status, &ans)
		return
	}
	writeJSON(w, a.status, map[string]string{"error": a.msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	writeJSONBytes(w, status, b, err)
}

// writeJSONBytes writes b, v encoded, or an internal error when v's
// encoding failed.
func writeJSONBytes(w http.ResponseWriter, status int, b []byte, err error) {
	if err != nil { // only strings, times and raw JSON that was checked
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header()["Content-Type"] = jsonType
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
