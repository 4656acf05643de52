package approvals

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

//go:embed page.html
var pageFS embed.FS

func parsePages() (*template.Template, error) {
	t, err := template.New("page.html").Funcs(template.FuncMap{"reveal": reveal}).ParseFS(pageFS, "page.html")
	if err != nil {
		return nil, fmt.Errorf("approvals: parsing the page template: %w", err)
	}
	return t, nil
}

// pageData is everything page.html shows. html/template escapes every
// field: arguments, reasons and comments are the agent's or an approver's
// words, never markup.
type pageData struct {
	Title   string
	Message string
	Tone    string // ok | warn | bad: the colour of Message
	Call    *callView
	Forms   bool // Approve / Reject, only for a waiting call and a good token
	Token   string
	Action  string
	Max     int // longest comment, in characters
}

// callView is a call as the page shows it.
type callView struct {
	ID          string
	Status      string
	StatusClass string // waiting | ok | bad
	Kind        string
	Tool        string
	Upstream    string
	Subject     string
	Target      string
	Request     string // method and path
	Reasons     []string
	RuleIDs     []string
	Arguments   string // pretty-printed exact JSON
	Created     string
	Expires     string
	TimeLeft    string
	DecidedBy   string
	DecidedAt   string
	Comment     string
	Result      string
}

const timeLayout = "2006-01-02 15:04:05 UTC"

// view builds the page's picture of c. The call record's own tool,
// upstream and subject win over Info's copies; Info adds the rest.
func (h *Handler) view(c pending.Call) *callView {
	info := callinfo.Decode(c.Info) // unreadable info: the page shows what the record itself holds
	v := &callView{
		ID: c.ID, Status: statusText(c.State), StatusClass: statusClass(c.State),
		Kind: info.Kind, Tool: or(c.Tool, info.Tool), Upstream: or(c.Upstream, info.Upstream),
		Subject: or(c.Subject, info.Subject), Target: info.Target,
		Reasons: info.Reasons, RuleIDs: info.RuleIDs, Arguments: prettyJSON(info.Arguments),
		DecidedBy: c.DecidedBy, Comment: c.Comment,
	}
	if info.Method != "" || info.Path != "" {
		v.Request = strings.TrimSpace(info.Method + " " + info.Path)
	}
	if !c.CreatedAt.IsZero() {
		v.Created = c.CreatedAt.UTC().Format(timeLayout)
	}
	if !c.ExpiresAt.IsZero() {
		v.Expires = c.ExpiresAt.UTC().Format(timeLayout)
		if c.State == pending.Waiting {
			v.TimeLeft = timeLeft(c.ExpiresAt.Sub(h.now()))
		}
	}
	if !c.DecidedAt.IsZero() {
		v.DecidedAt = c.DecidedAt.UTC().Format(timeLayout)
	}
	if c.Result != nil {
		v.Result = fmt.Sprintf("the tool answered HTTP %d", c.Result.Status)
	}
	return v
}

// render writes the page whole or not at all: a template failure must not
// leave half a page that reads like a success.
func (h *Handler) render(w http.ResponseWriter, status int, data pageData) {
	data.Max = maxCommentChars
	var buf bytes.Buffer
	if err := h.pages.Execute(&buf, data); err != nil {
		h.log.Error("approval page failed to render", "error", err)
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

// prettyJSON indents the exact arguments. json.Indent only adds white
// space: numbers, escapes and key order stay as the agent sent them.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
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

// reveal spells out characters that hide or reorder text (bidi overrides,
// zero-width and other format characters, controls, line separators) as
// \uXXXX, so an approver sees the bytes that will run, not a disguise. In
// JSON that is a valid escape of the same character. Newlines, tabs and
// carriage returns stay (comments span lines); invalid UTF-8 shows as
// U+FFFD.
func reveal(s string) string {
	if strings.IndexFunc(s, hidden) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !hidden(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

func hidden(r rune) bool {
	switch r {
	case '\n', '\t', '\r':
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co)
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
