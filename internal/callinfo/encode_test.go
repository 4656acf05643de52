package callinfo

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEncodeMatchesMarshal holds Encode to encoding/json's form of the
// same Info, byte for byte, over Infos of every shape: strings that need
// escaping or are not UTF-8, nil, empty and full lists, arguments with
// spaces to compact.
func TestEncodeMatchesMarshal(t *testing.T) {
	for i, info := range randomInfos(2000) {
		got, want := info.Encode(), MarshalNoEscape(info)
		if !bytes.Equal(got, want) {
			t.Fatalf("Info %d: Encode =\n%s\nencoding/json =\n%s", i, got, want)
		}
	}
}

// randomInfos returns n Infos of every shape: strings that need escaping
// or are not UTF-8, nil, empty and full lists, arguments with spaces to
// compact.
func randomInfos(n int) []Info {
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
	var out []Info
	for range n {
		text := func() string { return texts[r.IntN(len(texts))] }
		info := Info{
			Kind: text(), Tool: text(), Upstream: text(), Subject: text(), Target: text(),
			Arguments: raws[r.IntN(len(raws))], Reasons: lists(r), RuleIDs: lists(r), Method: text(), Path: text(),
			MCPMethod: text(), HookAsked: r.IntN(2) == 0, MustAsk: r.IntN(2) == 0, OpenAsk: r.IntN(2) == 0, TargetsBeyond: r.IntN(2) == 0, PolicyInput: inputs[r.IntN(len(inputs))],
			GrantExtras: []string{"", text()}[r.IntN(2)],
		}
		switch r.IntN(4) {
		case 1:
			info.Headers = &Headers{}
		case 2:
			info.Headers = &Headers{List: []Header{}, Omitted: r.IntN(3)}
		case 3:
			info.Headers = &Headers{Omitted: r.IntN(2)}
			for range 1 + r.IntN(3) {
				hd := Header{Name: text(), Value: text(), Size: r.IntN(3) * 700, NotUTF8: r.IntN(3) == 0}
				if r.IntN(2) == 0 {
					hd.Value, hd.Hidden = "", true
				}
				info.Headers.List = append(info.Headers.List, hd)
			}
		}
		switch r.IntN(4) {
		case 1:
			info.OtherParams = &Params{}
		case 2:
			info.OtherParams = &Params{List: []Param{}, Omitted: r.IntN(3)}
		case 3:
			info.OtherParams = &Params{Omitted: r.IntN(2)}
			for range 1 + r.IntN(3) {
				p := Param{Name: text(), Value: raws[r.IntN(len(raws))]}
				if len(p.Value) == 0 {
					p.Size = r.IntN(3) * 9000
				}
				info.OtherParams.List = append(info.OtherParams.List, p)
			}
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
		out = append(out, info)
	}
	return out
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

// TestEncodeKeepsWhatDecodeGives holds what Encode keeps for Decode to
// what encoding/json reads from the encoding, over the Infos of
// TestEncodeMatchesMarshal, and checks that it keeps most of them.
func TestEncodeKeepsWhatDecodeGives(t *testing.T) {
	kept := 0
	for i, info := range randomInfos(2000) {
		enc := info.Encode()
		var want Info
		if err := json.Unmarshal(enc, &want); err != nil {
			t.Fatalf("Info %d: %s: %v", i, enc, err)
		}
		got, ok := decoded.get(decoded.hash(enc), enc)
		if !ok {
			if _, canKeep := info.asDecoded(nil); canKeep {
				t.Fatalf("Info %d was not kept", i)
			}
			continue
		}
		kept++
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Info %d: %s\nkept (-decoded +kept):\n%s", i, enc, diff)
		}
	}
	if kept < 200 {
		t.Fatalf("%d of 2000 Infos kept: the check above checked little", kept)
	}
	t.Logf("%d of 2000 Infos kept", kept)
}

// TestEncodeRefusesPolicyInputNotAnObject checks that a policy input
// Encode cannot append as it is gives no encoding rather than a broken
// one (or a kept Info for bytes that do not read back).
func TestEncodeRefusesPolicyInputNotAnObject(t *testing.T) {
	for _, in := range []string{"{", `{"a":1}` + "\n", ` {}`, `[1]`, `"x"`} {
		info := memoSample(9)
		info.PolicyInput = json.RawMessage(in)
		if enc := info.Encode(); enc != nil {
			t.Errorf("policy input %q: Encode = %s, want nil", in, enc)
		}
	}
}
