package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode checks the invariants the proxy relies on:
//
//   - Decode never panics and never modifies its input;
//   - every refusal is an *Error with an offset inside the input;
//   - whatever Decode accepts, encoding/json accepts and decodes to the same
//     value (so a Go upstream executes what the policy evaluated);
//   - where encoding/json accepts and Decode refuses, the reason is one of the
//     deliberate differential classes, not a gap in Decode's grammar;
//   - an accepted value survives json.Marshal and Decode unchanged;
//   - DecodeObject agrees with Decode.
func FuzzDecode(f *testing.F) {
	for _, tc := range acceptCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range refuseCases {
		// The megabyte-deep cases only slow the fuzzer down; "depth 65"
		// covers the same path.
		if len(tc.in) <= 4096 {
			f.Add([]byte(tc.in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		got, err := Decode(data)
		if !bytes.Equal(orig, data) {
			t.Fatalf("Decode modified its input")
		}
		std, stdErr := stdDecode(data)

		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%q) error %v is %T, want *Error", data, err, err)
			}
			if e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("Decode(%q) error offset %d outside [0, %d]", data, e.Offset, len(data))
			}
			if got != nil {
				t.Fatalf("Decode(%q) returned %v with error %v", data, got, err)
			}
			if stdErr == nil && !differentialReasons[e.Reason] {
				t.Fatalf("Decode(%q) = %v, but encoding/json accepts it and the reason is not a known differential", data, err)
			}
			if _, objErr := DecodeObject(data); objErr == nil {
				t.Fatalf("DecodeObject(%q) accepts what Decode refuses (%v)", data, err)
			}
			return
		}

		if stdErr != nil {
			t.Fatalf("Decode(%q) accepts what encoding/json refuses: %v", data, stdErr)
		}
		if diff := diffJSON(std, got); diff != "" {
			t.Fatalf("Decode(%q) differs from encoding/json (-std +strictjson):\n%s", data, diff)
		}
		if !utf8.Valid(data) {
			t.Fatalf("Decode(%q) accepted invalid UTF-8", data)
		}

		out, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("json.Marshal(Decode(%q)): %v", data, err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(json.Marshal(Decode(%q))) = %v; marshalled %q", data, err, out)
		}
		if diff := diffJSON(got, again); diff != "" {
			t.Fatalf("value of %q changed through json.Marshal (-first +second):\n%s", data, diff)
		}

		m, objErr := DecodeObject(data)
		if _, isObj := got.(map[string]any); !isObj {
			var e *Error
			if !errors.As(objErr, &e) || e.Reason != reasonNotObject {
				t.Fatalf("DecodeObject(%q) = %v, want %q", data, objErr, reasonNotObject)
			}
			return
		}
		if objErr != nil {
			t.Fatalf("DecodeObject(%q) = %v, but Decode accepts an object", data, objErr)
		}
		if diff := diffJSON(got, m); diff != "" {
			t.Fatalf("DecodeObject(%q) differs from Decode:\n%s", data, diff)
		}
	})
}

// FuzzKeyFold checks that the folded form used to index large objects puts
// two keys together exactly when strings.EqualFold does, and that the
// linear scan's ASCII shortcut never hides a match.
func FuzzKeyFold(f *testing.F) {
	for _, p := range [][2]string{
		{"path", "Path"},
		{"k", "\u212a"},
		{"s", "\u017f"},
		{"σ", "ς"},
		{"ss", "ß"},
		{"a_b", "ab"},
		{"é", "É"},
		{"kelvin", "\u212aELVIN"},
		{"", ""},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return // Decode refuses invalid UTF-8 before keys are compared
		}
		want := strings.EqualFold(a, b)
		if got := string(appendFold(nil, a)) == string(appendFold(nil, b)); got != want {
			t.Errorf("fold(%q) == fold(%q) is %v, EqualFold says %v", a, b, got, want)
		}
		keys := []keyEntry{{a, isASCII(a)}}
		if got := matchFold(keys, keyEntry{b, isASCII(b)}) == 0; got != want {
			t.Errorf("matchFold(%q, %q) is %v, EqualFold says %v", a, b, got, want)
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
