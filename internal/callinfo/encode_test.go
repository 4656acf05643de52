package callinfo

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestEncodeMatchesMarshal holds Encode to encoding/json's form of the
// same Info, byte for byte, over Infos of every shape: strings that need
// escaping or are not UTF-8, nil, empty and full lists, arguments with
// spaces to compact.
func TestEncodeMatchesMarshal(t *testing.T) {
	texts := []string{
		"", "write_note", "<b>&amp;</b>", "tab\there\nnew \"q\" \\", "\x00\x1f\x7f", "bad \xff\xfe utf-8",
		"line\u2028sep\u2029", "é ✓ 😀", "../../etc/passwd",
	}
	lists := func(r *rand.Rand) []string {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		ss := make([]string, 1+r.IntN(3))
		for i := range ss {
			ss[i] = texts[r.IntN(len(texts))]
		}
		return ss
	}
	raws := []json.RawMessage{
		nil, json.RawMessage(`{"path": "a.txt",  "n": [1, 2.5e3, true, null]}`),
		json.RawMessage(`"text with <html> & \u00e9"`), json.RawMessage(" [ ] "), json.RawMessage(`{}`),
	}
	inputs := []json.RawMessage{nil, {}, json.RawMessage(`{"version":"toolgate/v1","tool":{"name":"x<y"}}`)}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		text := func() string { return texts[r.IntN(len(texts))] }
		info := Info{
			Kind: text(), Tool: text(), Upstream: text(), Subject: text(), Target: text(),
			Arguments: raws[r.IntN(len(raws))], Reasons: lists(r), RuleIDs: lists(r), Method: text(), Path: text(),
			MCPMethod: text(), HookAsked: r.IntN(2) == 0, PolicyInput: inputs[r.IntN(len(inputs))],
		}
		switch r.IntN(3) {
		case 1:
			info.Approvers = []Approvers{}
		case 2:
			for range 1 + r.IntN(3) {
				info.Approvers = append(info.Approvers, Approvers{
					Reason: text(), Groups: lists(r), Subjects: lists(r), Min: r.IntN(4) - 1, Requester: r.IntN(2) == 0,
				})
			}
		}
		got, want := info.Encode(), MarshalNoEscape(info)
		if !bytes.Equal(got, want) {
			t.Fatalf("Info %d: Encode =\n%s\nencoding/json =\n%s", i, got, want)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	info := memoSample(1)
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			info.Encode()
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			MarshalNoEscape(info)
		}
	})
}
