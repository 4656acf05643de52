package pending

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cjsonApprovals are approvals as the decide script's cjson.encode wrote
// them (keys in Lua's table order, / and control characters escaped,
// other bytes as they are), and encodings around them.
var cjsonApprovals = []string{
	`[{"n":"0","t":"1700000000000","c":"ok alice","b":"alice"}]`,
	`[{"n":"0,1","t":"1700000000000","c":"","b":"a\/b\"c\\d\u0001\u007fé"}]`,
	`[{"b":"alice","c":"ok","n":"","t":"1"},{"t":"2","b":"bob","c":"see https:\/\/x\/y","n":"15"}]`,
	`[{"b":"\u00e9\u20ac\ud83d\ude00","c":"\ud800","n":"1","t":"-5"}]`,
	`[{"b":"x\b\f\n\r\t","c":"😀","n":"2","t":"3"}]`,
	`[{"b":"a","t":"1","b":"dup","n":"0"}]`,
	`[{"B":"a","t":"1"}]`,
	`[{"b":"a","t":"1","x":2}]`,
	`[{"b":"a","t":1}]`,
	`[{"b":"a","t":"1e3"}]`,
	`[{"b":"a","t":"1","n":"0,x"}]`,
	`[{"b":"a","t":"1"} ]`,
	` [{"b":"a","t":"1"}]`,
	`[{"b":"a","t":"1"}],`,
	`[{"b":"a","t":"1"},]`,
	`[{"b":"a\x01","t":"1"}]`,
	"[{\"b\":\"\xff\xfe\",\"t\":\"1\"}]",
	"[{\"t\":\"0\",\"b\":\"\xb3\\b\"}]", // not UTF-8 before an escape
	`[{"b":"\u00","t":"1"}]`,
	`[{"b":"\q","t":"1"}]`,
	`[{}]`, `[null]`, `[]`, `{}`, `null`, ``, `[`, `]`, `[{"b":"a","t":"1"}`,
	`[{"b":"},{","t":"1"},{"b":"},{","t":"2"}]`,
}

// decodeApprovalsRef is what decodeApprovals decodes without scanApprovals.
func decodeApprovalsRef(s string) ([]Approval, error) {
	if s == "" || s == "{}" {
		return nil, nil
	}
	return decodeApprovalsJSON(s)
}

// FuzzDecodeApprovals holds scanApprovals to encoding/json: what it
// decodes, encoding/json decodes without error to the same approvals, and
// decodeApprovals answers as encoding/json alone does, errors included.
func FuzzDecodeApprovals(f *testing.F) {
	for _, s := range cjsonApprovals {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantErr := decodeApprovalsRef(s)
		if fast, ok := scanApprovals(s); ok {
			if wantErr != nil {
				t.Fatalf("scanApprovals(%q) decoded what encoding/json refuses: %v", s, wantErr)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("scanApprovals(%q) = %#v, encoding/json %#v", s, fast, want)
			}
		}
		got, err := decodeApprovals(s)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("decodeApprovals(%q) error %v, encoding/json %v", s, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeApprovals(%q) = %#v, encoding/json %#v", s, got, want)
		}
	})
}

// TestDecodeApprovalsCJSON decodes what Redis' cjson encodes of approvals
// (as the decide script builds them) to the approvals given, without
// encoding/json when the strings are UTF-8.
func TestDecodeApprovalsCJSON(t *testing.T) {
	rdb := newRedisClient(t)
	const encode = `
local aps = {}
for i = 1, #ARGV, 4 do
  aps[#aps + 1] = {b = ARGV[i], t = ARGV[i + 1], c = ARGV[i + 2], n = ARGV[i + 3]}
end
return cjson.encode(aps)`
	many := make([]Approval, maxApprover)
	for i := range many {
		many[i] = Approval{By: "approver" + strconv.Itoa(i), At: time.UnixMilli(int64(i)), Counts: []int{i % maxQuorum}}
	}
	var control strings.Builder
	for c := range 0x80 {
		control.WriteByte(byte(c))
	}
	cases := [][]Approval{
		{{By: "alice", At: time.UnixMilli(1700000000000), Comment: "ok alice", Counts: []int{0}}},
		{{By: "Érin ☃ 😀", At: time.UnixMilli(0), Comment: `a/b "c" \d` + "\n\t\x7f"}},
		{{By: "bob", At: time.UnixMilli(1), Comment: control.String(), Counts: []int{0, 1, 15}}},
		{{By: "},{", At: time.UnixMilli(2), Comment: `"},{"b":"x"`}, {By: "carol", At: time.UnixMilli(3)}},
		many,
	}
	for _, want := range cases {
		var args []any
		for _, a := range want {
			args = append(args, a.By, strconv.FormatInt(a.At.UnixMilli(), 10), a.Comment, encodeInts(a.Counts))
		}
		s, err := rdb.Eval(t.Context(), encode, nil, args...).Text()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := scanApprovals(s)
		if !ok {
			t.Errorf("scanApprovals(%q) left cjson's encoding to encoding/json", s)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("scanApprovals(%q) = %+v, want %+v", s, got, want)
		}
		if got, err := decodeApprovals(s); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeApprovals(%q) = %+v, %v, want %+v", s, got, err, want)
		}
	}
	// bytes that are not UTF-8, which cjson writes as they are, are
	// replaced as encoding/json replaces them
	s, err := rdb.Eval(t.Context(), encode, nil, "\xff\xfe", "1", "", "").Text()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeApprovals(s); err != nil || len(got) != 1 || got[0].By != "\uFFFD\uFFFD" {
		t.Errorf("decodeApprovals(%q) = %+v, %v, want one by %q", s, got, err, "\uFFFD\uFFFD")
	}
}

// TestDecodeApprovalsAllocs: an approval as cjson writes it costs the list
// and its counts, its strings none.
func TestDecodeApprovalsAllocs(t *testing.T) {
	s := cjsonApprovals[0]
	if n := testing.AllocsPerRun(100, func() {
		if _, err := decodeApprovals(s); err != nil {
			t.Fatal(err)
		}
	}); n > 2 {
		t.Errorf("decodeApprovals(%q): %v allocations, want at most 2", s, n)
	}
}
