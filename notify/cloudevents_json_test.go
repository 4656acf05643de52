package notify

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// tricky are strings encoding/json escapes in every way it has: quotes,
// backslashes, control characters, HTML characters it leaves alone here,
// U+2028/U+2029, invalid UTF-8, and plain text.
var tricky = []string{
	"", "write_note", `say "hi"`, `C:\notes\a.txt`, "line\nbreak\ttab\r", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "\u2028\u2029", "\xff\xfe broken", "caf\u00e9 \U0001F600", "https://x/approvals/ID?token=a&b=c",
}

var trickyArgs = []string{
	`{"path":"notes/a.txt"}`, "{ \"path\" : \"a\",\n  \"n\": [1, 2.50, -3e9, true, null] }", `"<&>"`, `[]`, "not json {",
	`{"s":"\u2028 \ud83d\ude00 \"q\""}`,
}

func randomEvent(r *rand.Rand) *Event {
	pick := func() string { return tricky[r.IntN(len(tricky))] }
	list := func() []string {
		if r.IntN(4) == 0 {
			return nil
		}
		out := make([]string, r.IntN(3))
		for i := range out {
			out[i] = pick()
		}
		return out
	}
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -7*3600)}
	at := func() time.Time {
		if r.IntN(5) == 0 {
			return time.Time{}
		}
		return time.Unix(r.Int64N(4e9), r.Int64N(1e9)*int64(r.IntN(2))).In(zones[r.IntN(len(zones))])
	}
	e := &Event{
		Type: TypeRequested, CallID: pick(), Tool: pick(), Upstream: pick(), Subject: pick(), ToolTarget: pick(), TargetsBeyond: r.IntN(2) == 0,
		Reasons: list(), RuleIDs: list(), StatusURL: pick(), ApprovalURL: pick(), ExpiresAt: at(), Time: at(),
	}
	if r.IntN(3) > 0 {
		e.Arguments = json.RawMessage(trickyArgs[r.IntN(len(trickyArgs))])
	}
	if r.IntN(2) == 0 {
		e.Headers = &Headers{}
		for range r.IntN(3) {
			e.Headers.List = append(e.Headers.List, Header{Name: pick(), Value: pick()})
		}
	}
	if r.IntN(2) == 0 {
		e.OtherParams = &Params{Omitted: r.IntN(2)}
		for range r.IntN(3) {
			e.OtherParams.List = append(e.OtherParams.List, Param{Name: pick(), Value: pick()})
		}
	}
	if r.IntN(2) == 0 {
		e.Type = TypeResolved
		e.Outcome, e.DecidedBy, e.Comment = pick(), pick(), pick()
		for range r.IntN(3) {
			e.Approvals = append(e.Approvals, Approval{By: pick(), At: at(), Comment: pick()})
		}
	}
	return e
}

// TestCloudEventEncodesAsJSON: the hand-written encoding of a CloudEvents
// body is byte for byte what encoding/json writes without HTML escaping,
// on events with every kind of string, argument, time and optional field.
func TestCloudEventEncodesAsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		ev := cloudEvent(randomEvent(r))
		want, werr := encodeJSON(ev)
		got, gerr := ev.appendJSON(nil)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("event %d: errors %v and %v", i, werr, gerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestRenderCloudEventEncodesAsJSON: a CloudEvents body, whose arguments
// appendJSON checks as it copies them, is byte for byte cloudEvent's
// encoded by encoding/json, arguments that are not JSON included.
func TestRenderCloudEventEncodesAsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 5000 {
		e := randomEvent(r)
		want, werr := encodeJSON(cloudEvent(e))
		got, _, gerr := render(FormatCloudEvents, e, false)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("event %d: errors %v and %v", i, werr, gerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestCloudEventEncodingRefusesWhatJSONRefuses: a time encoding/json cannot
// write fails the hand-written encoding too.
func TestCloudEventEncodingRefusesWhatJSONRefuses(t *testing.T) {
	e := randomEvent(rand.New(rand.NewPCG(3, 4)))
	e.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := cloudEvent(e)
	if _, err := encodeJSON(ev); err == nil {
		t.Fatal("encoding/json wrote year 10000")
	}
	if _, err := ev.appendJSON(nil); err == nil {
		t.Error("the hand-written encoding wrote year 10000")
	}
}

func BenchmarkRenderCloudEvent(b *testing.B) {
	e := &Event{
		Type: TypeRequested, CallID: "RLYOGGLFSOIJNCKHNTPSJUXSXP", Tool: "write_note", Upstream: "notes", Subject: "agent-42",
		ToolTarget: "notes/today.txt", Arguments: json.RawMessage(`{"path":"notes/today.txt","content":"hello"}`),
		Reasons: []string{"writing notes needs a human"}, RuleIDs: []string{"notes-ask"},
		StatusURL:   "http://127.0.0.1:8080/_toolgate/calls/RLYOGGLFSOIJNCKHNTPSJUXSXP",
		ApprovalURL: "http://127.0.0.1:8081/approvals/RLYOGGLFSOIJNCKHNTPSJUXSXP?token=v1.1796304963.Lxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		ExpiresAt:   time.Now().Add(time.Hour), Time: time.Now(),
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeJSON(cloudEvent(e)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := render(FormatCloudEvents, e, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
