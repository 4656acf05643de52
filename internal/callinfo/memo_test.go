package callinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func memoSample(i int) Info {
	return Info{
		Kind: "mcp", Tool: "write_note", Upstream: "notes", Subject: "agent-42", Target: fmt.Sprintf("notes/%d.txt", i),
		Arguments: json.RawMessage(`{"path":"notes/today.txt","content":"` + strings.Repeat("x", 150) + `"}`),
		Reasons:   []string{"writing notes needs a human"}, RuleIDs: []string{"notes-ask"}, Method: "POST", Path: "/mcp",
		MCPMethod: "tools/call", HookAsked: true,
		Headers:     &Headers{List: []Header{{Name: "X-Api-Key", Hidden: true, Size: 12}, {Name: "X-Mode", Value: "fast"}}, Omitted: 1},
		OtherParams: &Params{List: []Param{{Name: "_meta", Value: json.RawMessage(`{"acme/path":"/etc/passwd"}`)}, {Name: "big", Size: 20000}}, Omitted: 1},
		Approvers:   []Approvers{{Reason: "notes-ask", Groups: []string{"sre"}, Subjects: []string{"alice"}, Min: 2}},
		PolicyInput: json.RawMessage(`{"tool":{"name":"write_note"},"subject":{"id":"agent-42"}}`),
	}
}

// TestDecodeKept checks that an Info read again is the one decoded, and
// that no reader can change what the next one gets.
func TestDecodeKept(t *testing.T) {
	enc := memoSample(1).Encode()
	var want Info
	if err := json.Unmarshal(enc, &want); err != nil {
		t.Fatal(err)
	}
	first := Decode(enc)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("first Decode (-want +got):\n%s", diff)
	}
	// Every part a reader could write to, written to, by the reader of
	// the decoding and by a reader of the kept copy.
	scribble(first)
	scribble(Decode(bytes.Clone(enc)))
	again := Decode(bytes.Clone(enc))
	if diff := cmp.Diff(want, again); diff != "" {
		t.Fatalf("Decode after readers changed their copies (-want +got):\n%s", diff)
	}
	if h := decoded.hash(enc); !decodedHas(h, enc) {
		t.Fatal("the decoded Info was not kept: the test above checked nothing of the memo")
	}
}

// TestDecodeSameHashOtherBytes checks that an entry is found by the whole
// encoding: another encoding under the same hash decodes as itself.
func TestDecodeSameHashOtherBytes(t *testing.T) {
	a, b := memoSample(2).Encode(), memoSample(3).Encode()
	Decode(a) // the memo is made
	decoded.mu.Lock()
	decoded.entries[decoded.hash(b)] = memoEntry{enc: a, info: memoSample(2)} // as if a's hash were b's
	decoded.mu.Unlock()
	if got := Decode(b); got.Target != "notes/3.txt" {
		t.Fatalf("Decode(b).Target = %q: the Info of other bytes under the same hash", got.Target)
	}
}

// TestDecodeBounded checks that the memo never holds more than its
// bounds, and that an unreadable Info is not kept.
func TestDecodeBounded(t *testing.T) {
	for i := range memoMaxEntries + 10 {
		Decode(memoSample(i).Encode())
	}
	big := memoSample(0)
	big.Arguments = json.RawMessage(`"` + strings.Repeat("y", memoMaxInfo) + `"`)
	Decode(big.Encode())
	bad := []byte(`{"tool": 5, "kind": "rest"`)
	Decode(bad)
	decoded.mu.Lock()
	defer decoded.mu.Unlock()
	if n := len(decoded.entries); n > memoMaxEntries || decoded.bytes > memoMaxBytes {
		t.Fatalf("memo holds %d entries, %d bytes; bounds %d, %d", n, decoded.bytes, memoMaxEntries, memoMaxBytes)
	}
	for _, e := range decoded.entries {
		if len(e.enc) > memoMaxInfo || bytes.Equal(e.enc, bad) {
			t.Fatalf("memo kept an Info of %d bytes (%.40q…)", len(e.enc), e.enc)
		}
	}
}

func scribble(info Info) {
	info.Arguments[0], info.PolicyInput[0] = 'X', 'X'
	info.Reasons[0], info.RuleIDs[0] = "changed", "changed"
	info.Approvers[0].Groups[0], info.Approvers[0].Subjects[0], info.Approvers[0].Min = "changed", "changed", 9
	info.Headers.List[0].Value, info.Headers.Omitted = "changed", 9
	info.OtherParams.List[0].Value[0], info.OtherParams.List[1].Name, info.OtherParams.Omitted = 'X', "changed", 9
}

func decodedHas(h uint64, enc []byte) bool {
	decoded.mu.Lock()
	defer decoded.mu.Unlock()
	e, ok := decoded.entries[h]
	return ok && bytes.Equal(e.enc, enc)
}

func BenchmarkDecode(b *testing.B) {
	enc := memoSample(1).Encode()
	b.Run("kept", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Decode(enc)
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var info Info
			_ = json.Unmarshal(enc, &info)
		}
	})
}
