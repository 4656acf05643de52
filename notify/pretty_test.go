package notify

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestIndentPrefix: the arguments of a chat message are indented as
// json.Indent does (but for whitespace after the value, which is
// dropped), and never past the bound whatever the arguments' size.
func TestIndentPrefix(t *testing.T) {
	for _, src := range []string{
		`{}`, `[]`, `{"a":1}`, `{"a":[1,2,{"b":"x\"y,z:{"}],"c":{},"d":[]}`, ` { "a" : [ 1 , 2 ] , "b" : { } }`,
		`"str"`, `123`, `[[[]],[{}]]`, `{"k":"é\u00e9\\"}`, "{\"a\":\n\t[ ]}",
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(src), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got, complete := indentPrefix([]byte(src), 1<<20); got != want.String() || !complete {
			t.Errorf("%s:\n got %q\nwant %q", src, got, want.String())
		}
	}
	if got, complete := indentPrefix([]byte(`{"a":"`+strings.Repeat("é", 100)+`"}`), 50); len(got) > 50 || complete || !strings.HasPrefix(got, "{\n  \"a\": \"é") {
		t.Errorf("cut at 50 bytes: %q, complete %v", got, complete)
	}
}

// deepArgs returns arguments of about size bytes: an object whose one
// member is depth nested arrays of zeros (within an MCP body's 64 levels).
func deepArgs(size, depth int) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"a":` + strings.Repeat("[", depth))
	for b.Len() < size-depth-4 {
		b.WriteString("0,")
	}
	b.WriteString("0" + strings.Repeat("]", depth) + "}")
	return b.Bytes()
}

// TestChatRenderBounded: a Slack or Teams message of a call with half a
// megabyte of arguments nested 58 deep shows argumentsLimit characters of
// them, says it is cut, and costs a few copies of the arguments at most
// to render. Indented whole before the cut, it allocated 237 MiB and took
// more than a second, for each message.
func TestChatRenderBounded(t *testing.T) {
	args := deepArgs(512<<10, 58)
	for _, format := range []string{FormatSlack, FormatTeams} {
		e := requested("call-deep")
		e.Arguments = args
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		body, _, err := render(format, &e, false)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(4*len(args)) {
			t.Errorf("%s: rendering allocated %d KiB for %d KiB of arguments", format, alloc>>10, len(args)>>10)
		}
		if !strings.Contains(string(body), "characters shown, of arguments of 524") {
			t.Errorf("%s: the message does not say the arguments were cut: %.300s", format, body)
		}
	}
}
