package approvals

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

func TestReveal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"line one\nline two\r\n\ttabbed", "line one\nline two\r\n\ttabbed"},
		{"a\u202etxt.exe", `a\u202etxt.exe`},   // right-to-left override
		{"zero\u200bwidth", `zero\u200bwidth`}, // zero-width space
		{"bell\x07", `bell\u0007`},             // control
		{"line\u2028sep", `line\u2028sep`},     // line separator
		{"tag\U000E0041", `tag\udb40\udc41`},   // tag character, as a JSON surrogate pair
		{"bad\xffbyte", "bad\ufffdbyte"},       // invalid UTF-8
		{"émoji 👍 日本", "émoji 👍 日本"},           // ordinary text stays
	}
	for _, tt := range tests {
		if got := reveal(tt.in); got != tt.want {
			t.Errorf("reveal(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Revealed JSON is still the same JSON.
	raw := "{\"p\":\"a\u202eb\"}"
	var before, after map[string]string
	if err := json.Unmarshal([]byte(raw), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(reveal(raw)), &after); err != nil {
		t.Fatal(err)
	}
	if before["p"] != after["p"] {
		t.Errorf("reveal changed the JSON value: %q, then %q", before["p"], after["p"])
	}
}

func TestPrettyJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1.50e3,"a":[true,null]}`, "{\n  \"b\": 1.50e3,\n  \"a\": [\n    true,\n    null\n  ]\n}"},
		{`{"s":"\u003c"}`, "{\n  \"s\": \"\\u003c\"\n}"}, // escapes stay as sent
		{`not json`, `not json`},
		{``, ``},
	}
	for _, tt := range tests {
		if got := prettyJSON(json.RawMessage(tt.in)); got != tt.want {
			t.Errorf("prettyJSON(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTimeLeft(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "expired"},
		{0, "expired"},
		{1500 * time.Millisecond, "2s left"},
		{61 * time.Second, "1m 01s left"},
		{time.Hour + 2*time.Minute + 3*time.Second, "1h 02m left"},
		{25 * time.Hour, "25h 00m left"},
	}
	for _, tt := range tests {
		if got := timeLeft(tt.d); got != tt.want {
			t.Errorf("timeLeft(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestParseDecisionRequest(t *testing.T) {
	tests := []struct {
		body    string
		want    decisionRequest
		wantErr bool
	}{
		{`{"decision":"approve"}`, decisionRequest{decision: "approve"}, false},
		{` {"comment":"c","decision":"reject"} `, decisionRequest{decision: "reject", comment: "c"}, false},
		{`{"decision":"approve","comment":null}`, decisionRequest{decision: "approve"}, false},
		{`{}`, decisionRequest{}, false}, // parseDecision refuses the missing decision
		{``, decisionRequest{}, true},
		{`null`, decisionRequest{}, true},
		{`{"decision":"approve"`, decisionRequest{}, true},
		{`{"decision":"approve",}`, decisionRequest{}, true},
		{`{"decision":1}`, decisionRequest{}, true},
		{`{"comment":{}}`, decisionRequest{}, true},
		{`{"decision":"a","decision":"b"}`, decisionRequest{}, true},
		{`{"DECISION":"approve"}`, decisionRequest{}, true},
		{`{"decision":"approve"} x`, decisionRequest{}, true},
	}
	for _, tt := range tests {
		got, err := parseDecisionRequest([]byte(tt.body))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseDecisionRequest(%q) = %+v, %v; want %+v, error %v", tt.body, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestNew_ChecksConfig(t *testing.T) {
	signer, err := NewSigner([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	store := pending.NewMemory(pending.Options{})
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Store: store, Signer: signer}, true},
		{"no store", Config{Signer: signer}, false},
		{"no signer", Config{Store: store}, false},
		{"empty key", Config{Store: store, Signer: signer, Approvers: []Approver{{Name: "alice"}}}, false},
		{"empty name", Config{Store: store, Signer: signer, Approvers: []Approver{{Key: "k"}}}, false},
		{"shared key", Config{Store: store, Signer: signer, Approvers: []Approver{{"alice", "k"}, {"bob", "k"}}}, false},
		{"public URL without scheme", Config{Store: store, Signer: signer, PublicURL: "toolgate.example.com"}, false},
		{"public URL", Config{Store: store, Signer: signer, PublicURL: "https://toolgate.example.com/"}, true},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); (err == nil) != tt.ok {
			t.Errorf("%s: New() error = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
