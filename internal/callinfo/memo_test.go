package callinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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
// that what the memo keeps shares nothing its callers own: neither the
// bytes Decode was given nor the Info that Encode encoded. Readers share
// what Decode gives, and write to none of it (Decode).
func TestDecodeKept(t *testing.T) {
	info := memoSample(1)
	enc := info.Encode()
	var want Info
	if err := json.Unmarshal(enc, &want); err != nil {
		t.Fatal(err)
	}
	// Encode kept what Decode gives: the encoder's Info is its own to
	// change (its encoding is read only, as a stored call's bytes are).
	scribble(info)
	if diff := cmp.Diff(want, Decode(bytes.Clone(enc))); diff != "" {
		t.Fatalf("Decode after the encoder changed its Info (-want +got):\n%s", diff)
	}

	// Decode kept what it decoded from bytes the caller may change.
	other := memoSample(2)
	other.Approvers = nil
	enc2 := other.Encode()
	clear(decoded.entries) // so that Decode decodes
	b := bytes.Clone(enc2)
	first := Decode(b)
	clear(b)
	again := Decode(bytes.Clone(enc2))
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("Decode after its caller changed the bytes it decoded (-first +again):\n%s", diff)
	}
	if h := decoded.hash(enc2); !decodedHas(h, enc2) {
		t.Fatal("the decoded Info was not kept: the test above checked nothing of the memo")
	}
	if &first.Reasons[0] != &again.Reasons[0] {
		t.Fatal("two Decodes of the same bytes gave different Reasons: the memo copies what it could share")
	}
}

// TestCheckKept checks that CheckKept finds a reader's write to a shared
// Info, in any part a reader could write to, and nothing where no reader
// wrote.
func TestCheckKept(t *testing.T) {
	for i, write := range []func(Info){
		func(info Info) { info.Arguments[0] = 'X' },
		func(info Info) { info.PolicyInput[0] = 'X' },
		func(info Info) { info.Reasons[0] = "changed" },
		func(info Info) { slices.Reverse(info.RuleIDs) },
		func(info Info) { info.Approvers[0].Groups[0] = "changed" },
		func(info Info) { info.Approvers[0].Min = 9 },
		func(info Info) { info.Headers.List[0].Value = "changed" },
		func(info Info) { info.Headers.Omitted = 9 },
		func(info Info) { info.OtherParams.List[0].Value[0] = 'X' },
		func(info Info) { info.OtherParams.List[1].Name = "changed" },
	} {
		clear(decoded.entries)
		sample := memoSample(i)
		sample.RuleIDs = []string{"notes-ask", "other"}
		// A copy: the memo shares Encode's own. The Info is kept by
		// Encode, then by Decode.
		enc := bytes.Clone(sample.Encode())
		for range 2 {
			if err := CheckKept(); err != nil {
				t.Fatalf("write %d: before any write: %v", i, err)
			}
			write(Decode(enc))
			if CheckKept() == nil {
				t.Fatalf("write %d: CheckKept found nothing", i)
			}
			clear(decoded.entries)
			Decode(enc)
		}
	}
	clear(decoded.entries)
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
