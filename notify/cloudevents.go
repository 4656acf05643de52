package notify

import (
	"encoding/json"
	"time"
)

// ceEvent is a CloudEvents 1.0 event in structured JSON mode
// (Content-Type: application/cloudevents+json).
type ceEvent struct {
	SpecVersion     string `json:"specversion"`
	Type            string `json:"type"`
	Source          string `json:"source"`
	ID              string `json:"id"`
	Time            string `json:"time"`
	DataContentType string `json:"datacontenttype"`
	Subject         string `json:"subject"` // the call ID
	Data            ceData `json:"data"`
}

// ceData is the event's data. The fields docs/http-api.md lists are always
// present on a requested event (null or "" when unknown) so receivers need
// not guess; approval_url is left out of a resolved event, where the link
// no longer decides anything, and the outcome fields appear only there.
type ceData struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Upstream string `json:"upstream"`
	Subject  string `json:"subject"`
	// Method and Path are the HTTP request approving sends (Path with
	// its query); MCPMethod an MCP call's JSON-RPC method.
	Method    string `json:"method"`
	Path      string `json:"path"`
	MCPMethod string `json:"mcp_method,omitempty"`
	Target    string `json:"target,omitempty"`
	// TargetsBeyond: the call names more targets than Target.
	TargetsBeyond bool            `json:"targets_beyond,omitempty"`
	Arguments     json.RawMessage `json:"arguments"`
	Reasons       []string        `json:"reasons"`
	RuleIDs       []string        `json:"rule_ids"`
	// HeaderNames name the headers the call sends upstream (Headers), once
	// each: absent when it sends none of the agent's, or was parked before
	// toolgate listed them.
	HeaderNames []string `json:"header_names,omitempty"`
	// ParamNames name the other members of an MCP tool call's params
	// that it sends (OtherParams): absent when there are none.
	ParamNames  []string   `json:"param_names,omitempty"`
	ApprovalURL *string    `json:"approval_url,omitempty"`
	StatusURL   string     `json:"status_url"`
	ExpiresAt   *time.Time `json:"expires_at"`
	Outcome     *string    `json:"outcome,omitempty"`
	DecidedBy   *string    `json:"decided_by,omitempty"`
	Comment     *string    `json:"comment,omitempty"`
	Approvals   []Approval `json:"approvals,omitempty"`
}

// cloudEvent is e's event as encoding/json would encode it: arguments that
// are not JSON are a JSON string of their bytes.
func cloudEvent(e *Event) ceEvent {
	ev := uncheckedCloudEvent(e)
	if d := &ev.Data; d.Arguments != nil && !json.Valid(d.Arguments) {
		d.Arguments = argumentsString(d.Arguments)
	}
	return ev
}

// argumentsString is arguments that are not JSON as what announces them
// anyway (a person must still learn that the call waits): the bytes as a
// JSON string, rather than a body that would not encode.
func argumentsString(args json.RawMessage) json.RawMessage {
	s, _ := json.Marshal(string(args))
	return s
}

// uncheckedCloudEvent is cloudEvent without the check of the arguments,
// which appendJSON makes as it copies them.
func uncheckedCloudEvent(e *Event) ceEvent {
	d := ceData{
		CallID:        e.CallID,
		Tool:          e.Tool,
		Upstream:      e.Upstream,
		Subject:       e.Subject,
		Method:        e.Method,
		Path:          e.Path,
		MCPMethod:     e.MCPMethod,
		Target:        e.ToolTarget,
		TargetsBeyond: e.TargetsBeyond,
		Arguments:     e.Arguments,
		Reasons:       nonNil(e.Reasons),
		RuleIDs:       nonNil(e.RuleIDs),
		StatusURL:     e.StatusURL,
		ParamNames:    e.OtherParams.names(),
	}
	if h := e.Headers; h != nil && len(h.List) > 0 {
		d.HeaderNames = make([]string, 0, len(h.List))
		for _, hd := range h.List {
			if n := len(d.HeaderNames); n == 0 || d.HeaderNames[n-1] != hd.Name {
				d.HeaderNames = append(d.HeaderNames, hd.Name)
			}
		}
	}
	if len(d.Arguments) == 0 {
		d.Arguments = nil // encodes as null; an empty RawMessage would not encode at all
	}
	if !e.ExpiresAt.IsZero() {
		t := e.ExpiresAt.UTC()
		d.ExpiresAt = &t
	}
	if e.Type == TypeResolved {
		d.Outcome, d.DecidedBy, d.Comment, d.Approvals = &e.Outcome, &e.DecidedBy, &e.Comment, e.Approvals
	} else {
		d.ApprovalURL = &e.ApprovalURL
	}
	return ceEvent{
		SpecVersion:     "1.0",
		Type:            e.Type,
		Source:          "toolgate",
		ID:              e.id(),
		Time:            e.Time.UTC().Format(time.RFC3339Nano),
		DataContentType: "application/json",
		Subject:         e.CallID,
		Data:            d,
	}
}

// nonNil makes a nil list encode as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
