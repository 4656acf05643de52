package callinfo

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestHeadersOf(t *testing.T) {
	skip := func(k string) bool { return strings.HasPrefix(k, "X-Forwarded-") }
	hide := func(k string) bool { return k == "X-Api-Key" || k == "Cookie" }
	h := map[string][]string{
		"X-Target-Override": {"/etc/shadow"},
		"X-Api-Key":         {"someone-elses-key"},
		"Cookie":            {"session=admin", "b=2"},
		"Accept":            {"*/*"},
		"X-Forwarded-For":   {"10.0.0.1"},
		"X-Bad":             {"a\xffb"},
	}
	got := HeadersOf(h, skip, hide)
	want := &Headers{List: []Header{
		{Name: "Accept", Value: "*/*"},
		{Name: "Cookie", Hidden: true, Size: len("session=admin")},
		{Name: "Cookie", Hidden: true, Size: len("b=2")},
		{Name: "X-Api-Key", Hidden: true, Size: len("someone-elses-key")},
		{Name: "X-Bad", Value: `a\xFFb`, NotUTF8: true}, // each byte shown, nothing cut
		{Name: "X-Target-Override", Value: "/etc/shadow"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HeadersOf (-want +got):\n%s", diff)
	}
	if strings.Contains(string(Info{Headers: got}.Encode()), "someone-elses-key") || strings.Contains(string(MarshalNoEscape(got)), "admin") {
		t.Error("a hidden value is in the encoding")
	}
	if got.Count() != 6 {
		t.Errorf("Count = %d, want 6", got.Count())
	}

	// None: an empty list, never nil (nil is a call parked before headers
	// were listed).
	if got := HeadersOf(map[string][]string{"X-Forwarded-Proto": {"http"}}, skip, hide); got == nil || got.List == nil || got.Count() != 0 {
		t.Errorf("HeadersOf(only skipped) = %#v, want an empty list", got)
	}
	if enc := (Info{Headers: HeadersOf(nil, skip, hide)}).Encode(); !strings.Contains(string(enc), `"headers":{"list":[]}`) {
		t.Errorf("no headers encode as %s", enc)
	}
}

func TestHeadersOfBounds(t *testing.T) {
	none := func(string) bool { return false }

	// Long names and values are cut at a rune boundary and say how long
	// the value was.
	long := strings.Repeat("é", MaxHeaderValue)
	got := HeadersOf(map[string][]string{strings.Repeat("N", 2*MaxHeaderName): {long}}, none, none)
	hd := got.List[0]
	if len(hd.Name) > MaxHeaderName || !strings.HasSuffix(hd.Name, "…") {
		t.Errorf("name of %d bytes not cut to %d", len(hd.Name), MaxHeaderName)
	}
	if len(hd.Value) > MaxHeaderValue || !utf8.ValidString(hd.Value) || !strings.HasSuffix(hd.Value, "…") || hd.Size != len(long) {
		t.Errorf("value of %d bytes (size %d), want it cut to %d and size %d", len(hd.Value), hd.Size, MaxHeaderValue, len(long))
	}

	// Past MaxHeaders: the first by name are listed, the rest counted.
	many := map[string][]string{}
	for i := range MaxHeaders + 10 {
		many[fmt.Sprintf("X-H%03d", i)] = []string{"v"}
	}
	got = HeadersOf(many, none, none)
	if len(got.List) != MaxHeaders || got.Omitted != 10 || got.List[MaxHeaders-1].Name != fmt.Sprintf("X-H%03d", MaxHeaders-1) {
		t.Errorf("%d headers listed, %d omitted, last %q; want %d, 10, the first by name", len(got.List), got.Omitted, got.List[len(got.List)-1].Name, MaxHeaders)
	}

	// Past MaxHeadersBytes: the same.
	big := map[string][]string{}
	for i := range 40 {
		big[fmt.Sprintf("X-B%02d", i)] = []string{strings.Repeat("v", MaxHeaderValue)}
	}
	got = HeadersOf(big, none, none)
	size := 0
	for _, hd := range got.List {
		size += len(hd.Name) + len(hd.Value)
	}
	if size > MaxHeadersBytes || got.Count() != 40 || got.Omitted == 0 || got.List[len(got.List)-1].Name != fmt.Sprintf("X-B%02d", len(got.List)-1) {
		t.Errorf("%d bytes in %d headers, %d omitted; want at most %d bytes, the first by name, 40 in all", size, len(got.List), got.Omitted, MaxHeadersBytes)
	}
	// And the Info that lists them reads back as it was.
	info := Info{Kind: "rest", Headers: got}
	var back Info
	if err := json.Unmarshal(info.Encode(), &back); err != nil || !cmp.Equal(info.Headers, back.Headers) {
		t.Errorf("headers read back %v (%v)", back.Headers, err)
	}
}

// TestHeadersOfNotUTF8: every byte that is not UTF-8 is shown, as \xNN,
// and a value is marked cut only when it was.
func TestHeadersOfNotUTF8(t *testing.T) {
	long := strings.Repeat("\xff", MaxHeaderValue)
	h := HeadersOf(map[string][]string{"X-A": {"\xff\xff\xff\xff\xff\xff"}, "X-B": {long}},
		func(string) bool { return false }, func(string) bool { return false })
	a, b := h.List[0], h.List[1]
	if a.Value != strings.Repeat(`\xFF`, 6) || !a.NotUTF8 || a.Size != 0 {
		t.Errorf("X-A: %+v, want six \\xFF, not UTF-8, not cut", a)
	}
	if !strings.HasSuffix(b.Value, "…") || len(b.Value) > MaxHeaderValue || !b.NotUTF8 || b.Size != len(long) {
		t.Errorf("X-B: %d bytes, not UTF-8 %v, size %d; want cut to %d with its size", len(b.Value), b.NotUTF8, b.Size, MaxHeaderValue)
	}
}

// TestShowBody: a body that is not UTF-8 shows every byte, none folded into
// another, and a backslash the agent wrote apart from an escaped byte.
func TestShowBody(t *testing.T) {
	for in, want := range map[string]string{
		"name=a;mode=keep":         "name=a;mode=keep",
		`C:\dir`:                   `C:\dir`, // UTF-8: as it is
		"a\xe9\xe9\xe9b":           `a\xE9\xE9\xE9b`,
		"\xe9 and a literal \\xE9": `\xE9 and a literal \\xE9`,
		"caf\xc3\xa9 \xff":         `café \xFF`,
		"\xe2\x80":                 `\xE2\x80`, // a cut rune: two bytes, two escapes
	} {
		if got := ShowBody([]byte(in)); got != want {
			t.Errorf("ShowBody(%q) = %q, want %q", in, got, want)
		}
	}
}
