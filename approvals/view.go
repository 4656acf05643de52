package approvals

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/reveal"
	"github.com/toolgate/toolgate/pending"
)

//go:embed page.html inbox.html
var pageFS embed.FS

// parsePages parses the approval page ("page.html", the set's root, which
// Execute runs) and the inbox ("inbox.html") into one set: they share the
// style sheet page.html defines.
func parsePages() (*template.Template, error) {
	t, err := template.New("page.html").Funcs(template.FuncMap{"reveal": reveal.String}).ParseFS(pageFS, "page.html", "inbox.html")
	if err != nil {
		return nil, fmt.Errorf("approvals: parsing the page templates: %w", err)
	}
	return t, nil
}

// pageData is everything page.html shows. html/template escapes every
// field: arguments, reasons and comments are the agent's or an approver's
// words, never markup.
type pageData struct {
	Title   string // the answer's title; the heading of a page that decides names the call instead
	Message string
	Tone    string // ok | warn | bad: the colour of Message
	Call    *callView
	Forms   bool // Approve / Reject, only for a waiting call and a good token or a signed-in approver
	// Token is the link token, when the page was opened by a link; CSRF
	// the form's token, when it was opened by a signed-in approver. The
	// form carries whichever is set.
	Token    string
	CSRF     string
	Approver string // the signed-in approver's name; "" when the page was opened by a link
	SignOut  string // where to post to sign out; "" when the identity has no sign-out
	Action   string
	Max      int // longest comment, in characters
	// Remember offers "approve and remember" (grants are kept and the call
	// names no approvers), for one of Lifetimes.
	Remember  bool
	Lifetimes []string
	// RejectOnly offers only Reject: the approver's own call.
	RejectOnly bool
	// Confirm is the requester's confirmation page: Confirm / Decline.
	Confirm bool
}

// Heading is the page's h1. A page that can decide asks the question and
// names the call ("Approve tools/call write_note?"); any other page that
// shows a call names it after its Title ("Rejected: write_note").
func (d pageData) Heading() string {
	var label string
	if d.Call != nil {
		label = reveal.String(d.Call.Label())
	}
	switch {
	case d.RejectOnly && label != "":
		return "Your call: " + label
	case d.Confirm && d.Forms && label != "":
		return "Run " + label + "?"
	case d.Forms && label != "":
		return "Approve " + label + "?"
	case d.Forms:
		return "Approve this call?"
	case label != "":
		return d.Title + ": " + label
	}
	return d.Title
}

// callView is a call as the page shows it.
type callView struct {
	ID          string
	Status      string
	StatusClass string // waiting | ok | bad
	Kind        string
	Tool        string
	Method      string // the MCP method (kind mcp), e.g. tools/call
	Upstream    string
	Subject     string
	Target      string
	// TargetsBeyond: the call names more targets than Target (another
	// target argument, an array, a value toolgate cannot read as a path).
	TargetsBeyond bool
	Request       string   // the HTTP method and path
	Query         []string // Request's query decoded, "name = value" a pair, when it holds escapes (decodedQuery)
	Reasons       []string
	RuleIDs       []string
	Arguments     string    // the exact JSON arguments, as stored
	Decoded       []argSpan // Arguments pretty-printed with strings decoded; nil when they are not JSON
	HasHidden     bool      // Decoded spells out invisible or reordering characters
	Created       string
	Age           string // "3m ago"
	Expires       string
	TimeLeft      string
	DecidedBy     string
	DecidedAt     string
	Comment       string
	Result        string

	// Headers are the request headers approving sends; nil for a call
	// parked before toolgate listed them (the page then says nothing of
	// them).
	Headers *headersView

	// Params are the other members of an MCP tool call's params that
	// approving sends (callinfo.Info.OtherParams); nil when it sends none.
	// ParamsUnlisted: an MCP call parked before toolgate listed them (the
	// form then does not claim to show them).
	Params         *paramsView
	ParamsUnlisted bool

	// Approvals are the approvals counted so far; Progress says how far
	// they are ("1 of 2 approvals", empty when one approval decides) and
	// Approvers who may give them ("" when anyone who may decide may).
	Approvals []approvalView
	Progress  string
	Approvers string
}

// headersView is the request headers a call sends, as the page shows
// them.
type headersView struct {
	List      []headerView
	Omitted   int  // sent, not listed (callinfo.MaxHeaders, MaxHeadersBytes)
	HasHidden bool // a name or value spells out invisible or reordering characters
}

// headerView is one header line. A hidden value is shown only as Marker:
// classed text of the page's own, which no value can pass for.
type headerView struct {
	Name, Value []argSpan
	Marker      string // "hidden: 12 bytes", for a credential's value
	Cut         string // "cut: 1024 of 4000 bytes shown", for a long value; a value not UTF-8 says so
}

// OmittedText warns of the headers sent that the page does not list.
func (v *headersView) OmittedText() string {
	if v.Omitted == 0 {
		return ""
	}
	return fmt.Sprintf("%s sent that this page does not list: it lists the first %d by name, %d KiB in all. Reject the call unless you expected so many.",
		plural(v.Omitted, "1 more header is", strconv.Itoa(v.Omitted)+" more headers are"), callinfo.MaxHeaders, callinfo.MaxHeadersBytes>>10)
}

func headersOf(h *callinfo.Headers) *headersView {
	if h == nil {
		return nil
	}
	v := &headersView{List: make([]headerView, 0, len(h.List)), Omitted: h.Omitted}
	for _, hd := range h.List {
		var hv headerView
		var hid bool
		hv.Name, hid = revealSpans(hd.Name)
		v.HasHidden = v.HasHidden || hid
		switch {
		case hd.Hidden:
			hv.Marker = "hidden: " + plural(hd.Size, "1 byte", strconv.Itoa(hd.Size)+" bytes")
		default:
			hv.Value, hid = revealSpans(hd.Value)
			v.HasHidden = v.HasHidden || hid
			var notes []string
			if hd.NotUTF8 {
				notes = append(notes, `not UTF-8: such bytes are shown as \xNN`)
			}
			if hd.Size > 0 && strings.HasSuffix(hd.Value, "…") {
				notes = append(notes, fmt.Sprintf("cut: %d of %d bytes shown", len(strings.TrimSuffix(hd.Value, "…")), hd.Size))
			}
			hv.Cut = strings.Join(notes, "; ")
		}
		v.List = append(v.List, hv)
	}
	return v
}

// paramsView is the other members of an MCP tool call's params, as the
// page shows them: those listed with their value as one JSON object,
// decoded as the arguments are, then those listed without it.
type paramsView struct {
	Decoded   []argSpan
	HasHidden bool
	NotShown  []paramNotShown
	Omitted   int // sent, not listed (callinfo.MaxParams)
}

// paramNotShown is a member whose value did not fit in
// callinfo.MaxParamsBytes: its name, and a marker of the page's own.
type paramNotShown struct {
	Name   []argSpan
	Marker string // "value not shown: 20000 bytes"
}

// OmittedText warns of the members sent that the page does not list.
func (v *paramsView) OmittedText() string {
	if v.Omitted == 0 {
		return ""
	}
	return fmt.Sprintf("%s sent that this page does not list: it lists the first %d by name. Reject the call unless you expected so many.",
		plural(v.Omitted, "1 more parameter is", strconv.Itoa(v.Omitted)+" more parameters are"), callinfo.MaxParams)
}

// paramsOf is p as the page shows it; nil when p lists nothing.
func paramsOf(p *callinfo.Params) *paramsView {
	if p.Count() == 0 {
		return nil
	}
	v := &paramsView{Omitted: p.Omitted}
	obj := []byte{'{'}
	for _, m := range p.List {
		if len(m.Value) == 0 {
			name, hid := revealSpans(m.Name)
			v.HasHidden = v.HasHidden || hid
			v.NotShown = append(v.NotShown, paramNotShown{Name: name, Marker: "value not shown: " + plural(m.Size, "1 byte", strconv.Itoa(m.Size)+" bytes")})
			continue
		}
		if len(obj) > 1 {
			obj = append(obj, ',')
		}
		name, _ := json.Marshal(m.Name) // a string: never fails
		obj = append(append(obj, name...), ':')
		obj = append(obj, m.Value...)
	}
	if len(obj) > 1 {
		var hid bool
		if v.Decoded, hid = decodeArgs(append(obj, '}')); v.Decoded == nil {
			// Not JSON (never from the proxy): shown as stored text.
			v.Decoded, hid = revealSpans(string(obj) + "}")
		}
		v.HasHidden = v.HasHidden || hid
	}
	return v
}

// Label names the call in a few words: the MCP method and tool, the tool,
// or for a plain HTTP call its request line.
func (v *callView) Label() string {
	switch {
	case v.Method != "" && v.Tool == "mcp:"+v.Method:
		// resources/read and prompts/get are decided as pseudo-tools;
		// their target (a URI, a prompt's name) says what they read.
		return strings.TrimSpace(v.Method + " " + v.Target)
	case v.Method != "" && v.Tool != "":
		return v.Method + " " + v.Tool
	case v.Tool != "":
		return v.Tool
	case v.Method != "":
		return v.Method
	}
	return v.Request
}

// approvalView is one approval as the page shows it.
type approvalView struct {
	By      string
	At      string
	Comment string
}

// approvalOf is one approval of a call (pending.Call.Approvals) as the page
// shows it.
func approvalOf(by string, at time.Time, comment string) approvalView {
	v := approvalView{By: by, Comment: comment}
	if !at.IsZero() {
		v.At = at.UTC().Format(timeLayout)
	}
	return v
}

// approversText says who may approve a call whose reason names its
// approvers: "groups sre, security · 2 approvals needed". Nothing named
// and one approval needed: "".
func approversText(groups, subjects []string, need int) string {
	var parts []string
	if len(groups) > 0 {
		parts = append(parts, plural(len(groups), "group", "groups")+" "+strings.Join(groups, ", "))
	}
	if len(subjects) > 0 {
		parts = append(parts, plural(len(subjects), "approver", "approvers")+" "+strings.Join(subjects, ", "))
	}
	if need > 1 {
		parts = append(parts, strconv.Itoa(need)+" approvals needed")
	}
	return strings.Join(parts, " · ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

const timeLayout = "2006-01-02 15:04:05 UTC"

// view builds the page's picture of c. The call record's own tool,
// upstream and subject win over Info's copies; Info adds the rest.
func (h *Handler) view(c pending.Call) *callView {
	info := callinfo.Decode(c.Info) // unreadable info: the page shows what the record itself holds
	v := &callView{
		ID: c.ID, Status: statusText(c.State), StatusClass: statusClass(c.State),
		Kind: info.Kind, Tool: or(c.Tool, info.Tool), Method: mcpMethod(info), Upstream: or(c.Upstream, info.Upstream),
		Subject: or(c.Subject, info.Subject), Target: info.Target, TargetsBeyond: info.TargetsBeyond,
		Reasons: info.Reasons, RuleIDs: info.RuleIDs, Arguments: string(info.Arguments),
		DecidedBy: c.DecidedBy, Comment: c.Comment,
	}
	if len(info.Arguments) > 0 {
		v.Decoded, v.HasHidden = decodeArgs(info.Arguments)
	}
	v.Headers = headersOf(info.Headers)
	v.Params = paramsOf(info.OtherParams)
	v.ParamsUnlisted = info.OtherParams == nil && info.Kind == "mcp" && info.Tool != ""
	if info.Method != "" || info.Path != "" {
		v.Request = strings.TrimSpace(info.Method + " " + info.Path)
		v.Query = decodedQuery(info.Path)
	}
	now := h.now()
	if !c.CreatedAt.IsZero() {
		v.Created = c.CreatedAt.UTC().Format(timeLayout)
		v.Age = ago(now.Sub(c.CreatedAt))
	}
	if !c.ExpiresAt.IsZero() {
		v.Expires = c.ExpiresAt.UTC().Format(timeLayout)
		if c.State == pending.Waiting {
			v.TimeLeft = timeLeft(c.ExpiresAt.Sub(now))
		}
	}
	if !c.DecidedAt.IsZero() {
		v.DecidedAt = c.DecidedAt.UTC().Format(timeLayout)
	}
	if c.Result != nil {
		v.Result = fmt.Sprintf("the tool answered HTTP %d", c.Result.Status)
	}
	// A single approval is the decision itself (DecidedBy); the list is for
	// calls that take several.
	if len(c.Quorum) > 0 {
		for _, a := range c.Approvals {
			v.Approvals = append(v.Approvals, approvalOf(a.By, a.At, a.Comment))
		}
	}
	v.Progress = progress(c, info)
	who := make([]string, 0, len(info.Approvers))
	for _, a := range info.Approvers {
		who = append(who, approversOf(a))
	}
	v.Approvers = strings.Join(who, "; ")
	return v
}

// mcpMethod is the JSON-RPC method of an MCP call. Calls parked before
// Info had MCPMethod have it only in their policy input document.
func mcpMethod(info callinfo.Info) string {
	if info.Kind != "mcp" {
		return ""
	}
	if info.MCPMethod != "" {
		return info.MCPMethod
	}
	var in struct {
		MCP struct {
			Method string `json:"method"`
		} `json:"mcp"`
	}
	_ = json.Unmarshal(info.PolicyInput, &in) // none, or unreadable: no method to show
	return in.MCP.Method
}

// render writes the approval page.
func (h *Handler) render(w http.ResponseWriter, status int, data pageData) {
	data.Max = maxCommentChars
	h.write(w, status, "page.html", data)
}

// renderInbox writes the inbox (GET /approvals).
func (h *Handler) renderInbox(w http.ResponseWriter, data inboxData) {
	h.write(w, http.StatusOK, "inbox.html", data)
}

// write executes the template name whole or not at all: a template failure
// must not leave half a page that reads like a success.
func (h *Handler) write(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.log.Error("approval page failed to render", "page", name, "error", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("internal error: the page could not be shown\n"))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func statusText(s pending.State) string {
	switch s {
	case pending.Waiting:
		return "waiting for a decision"
	case pending.Approved:
		return "approved; it will be forwarded once"
	case pending.Executing:
		return "approved; being forwarded"
	case pending.Executed:
		return "approved and executed"
	case pending.Rejected:
		return "rejected"
	case pending.Expired:
		return "expired: nobody decided in time, the call was refused"
	case pending.Failed:
		return "approved, but the tool could not be reached (nothing was sent)"
	case pending.Unknown:
		return "approved; whether the tool ran is unknown (it is never re-sent)"
	case pending.Cancelled:
		return "cancelled by the caller"
	}
	return string(s)
}

func statusClass(s pending.State) string {
	switch s {
	case pending.Waiting:
		return "waiting"
	case pending.Approved, pending.Executing, pending.Executed:
		return "ok"
	}
	return "bad"
}

func timeLeft(d time.Duration) string {
	if d <= 0 {
		return "expired"
	}
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm left", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %02ds left", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds left", int(d.Seconds()))
}

// ago says how long ago something happened, in its largest unit.
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// decodedQuery is the query of path ("/p?a=%2E%2E" → ["a = .."]), a line a
// pair in the order sent, when it holds an escape or a "+"; nil otherwise.
// A part that does not decode is shown as sent.
func decodedQuery(path string) []string {
	_, raw, ok := strings.Cut(path, "?")
	if !ok || !strings.ContainsAny(raw, "%+") {
		return nil
	}
	unescape := func(s string) string {
		if u, err := url.QueryUnescape(s); err == nil {
			return u
		}
		return s
	}
	var lines []string
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		lines = append(lines, unescape(k)+" = "+unescape(v))
	}
	return lines
}
