package callinfo

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestBriefOf(t *testing.T) {
	info := Info{
		Kind: "mcp", Tool: "write_note", MCPMethod: "tools/call", Upstream: "notes", Subject: "agent-42",
		Target: strings.Repeat("é", 200), Arguments: []byte(`{"content":"secret"}`), PolicyInput: []byte(`{"secret":1}`),
		Reasons: []string{"a", "b"}, RuleIDs: []string{"r1"}, Method: "POST", Path: "/mcp",
		Approvers: []Approvers{{Reason: "r1", Groups: []string{"sre"}, Min: 2}},
	}
	enc := BriefOf(info)
	b, ok := DecodeBrief(enc)
	if !ok || strings.Contains(string(enc), "secret") {
		t.Fatalf("BriefOf = %s", enc)
	}
	if len(b.Target) > MaxBriefText || !utf8.ValidString(b.Target) || !strings.HasSuffix(b.Target, "…") {
		t.Errorf("target %q (%d bytes): want it cut at a rune boundary to at most %d bytes", b.Target, len(b.Target), MaxBriefText)
	}
	want := info
	want.Arguments, want.PolicyInput, want.Target = nil, nil, b.Target
	if diff := cmp.Diff(want, b.Info()); diff != "" {
		t.Errorf("Brief.Info (-want +got):\n%s", diff)
	}

	// Reasons that escape to six bytes a byte: cut until the Brief fits.
	info.Reasons = append(slices.Repeat([]string{strings.Repeat("\x01", 300)}, MaxBriefReasons), "ninth")
	enc = BriefOf(info)
	if b, ok := DecodeBrief(enc); !ok || len(enc) > MaxBrief || len(b.Reasons) == 0 || len(b.Reasons) >= MaxBriefReasons || len(b.Approvers) != 1 {
		t.Errorf("BriefOf(escaped reasons) = %d bytes, %d reasons, %d approvers", len(enc), len(b.Reasons), len(b.Approvers))
	}

	// Approvers are never cut: when they do not fit, there is no Brief.
	info.Approvers = []Approvers{{Subjects: []string{strings.Repeat("s", MaxBrief)}, Min: 1}}
	if enc := BriefOf(info); enc != nil {
		t.Errorf("BriefOf(approvers too large) = %d bytes, want none", len(enc))
	}
	if _, ok := DecodeBrief(nil); ok {
		t.Error("DecodeBrief(nil) ok")
	}
	if _, ok := DecodeBrief([]byte("{")); ok {
		t.Error("DecodeBrief(unreadable) ok")
	}
}
