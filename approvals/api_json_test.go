package approvals

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestDecisionAnswerEncodesAsJSON: the hand-written encoding of a
// decision's answer is byte for byte what json.Marshal writes, on answers
// with every kind of string and every optional field.
func TestDecisionAnswerEncodesAsJSON(t *testing.T) {
	tricky := []string{
		"", "approved", `say "hi"`, `C:\notes`, "line\nbreak\ttab\r", "\x00\x01\x1f\x7f", "<script>&amp;</script>",
		"a<b", "&", "\u2028\u2029", "\xff\xfe broken", "caf\u00e9 \U0001F600", "https://x/a?token=a&b=c",
	}
	r := rand.New(rand.NewPCG(5, 6))
	pick := func() string { return tricky[r.IntN(len(tricky))] }
	for i := range 5000 {
		a := decisionAnswer{CallID: pick(), Status: pick(), DecidedBy: pick()}
		for range r.IntN(3) {
			a.Approvals = append(a.Approvals, approvalJSON{By: pick(), At: pick(), Comment: pick()})
		}
		if r.IntN(2) == 0 {
			a.Progress = pick()
		}
		if r.IntN(4) == 0 {
			a.Grant = &grantJSON{ID: pick(), Subject: pick(), Target: pick(), Covers: pick(), CreatedAt: pick()}
		}
		if r.IntN(2) == 0 {
			a.Error = pick()
		}
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.appendJSON(nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("answer %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
