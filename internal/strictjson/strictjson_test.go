package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

type (
	obj = map[string]any
	arr = []any
	num = json.Number
)

type acceptCase struct {
	name string
	in   string
	want any
}

type refuseCase struct {
	name   string
	in     string
	reason string
	offset int
}

// acceptCases are texts every reasonable parser reads the same way. Each must
// also decode to want under encoding/json (TestAcceptMatchesEncodingJSON).
var acceptCases = []acceptCase{
	{"empty object", `{}`, obj{}},
	{"empty array", `[]`, arr{}},
	{"whitespace everywhere", " \t\r\n{ \"a\" : 1 , \"b\" :[ ] }\n", obj{"a": num("1"), "b": arr{}}},
	{"string", `"hi"`, "hi"},
	{"empty string", `""`, ""},
	{"true", `true`, true},
	{"false", `false`, false},
	{"null", `null`, nil},
	{"zero", `0`, num("0")},
	{"negative zero", `-0`, num("-0")},
	{"negative integer", `-12`, num("-12")},
	{"fraction", `3.25`, num("3.25")},
	{"fraction with zero integer part", `0.5`, num("0.5")},
	{"exponent", `1e10`, num("1e10")},
	{"upper exponent with sign", `1E+2`, num("1E+2")},
	{"negative exponent", `-1.5e-7`, num("-1.5e-7")},
	{"huge exponent kept as literal", `1e400`, num("1e400")},
	{"big integer kept as literal", `123456789012345678901234567890`, num("123456789012345678901234567890")},
	{"trailing zeros kept", `1.500`, num("1.500")},
	{"mixed array", `[1,"a",true,false,null,{},[]]`, arr{num("1"), "a", true, false, nil, obj{}, arr{}}},
	{"nested", `{"a":{"b":[1,{"c":null}],"d":"e"}}`, obj{"a": obj{"b": arr{num("1"), obj{"c": nil}}, "d": "e"}}},
	{"same key in sibling objects", `[{"a":1},{"a":2}]`, arr{obj{"a": num("1")}, obj{"a": num("2")}}},
	{"same key at every depth", `{"a":{"a":{"a":1}}}`, obj{"a": obj{"a": obj{"a": num("1")}}}},
	{"case variants in different objects", `{"x":{"path":1},"y":{"Path":2}}`, obj{"x": obj{"path": num("1")}, "y": obj{"Path": num("2")}}},
	{"simple escapes", `"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
	{"unicode escape", `"caf\u00e9"`, "café"},
	{"surrogate pair", `"\ud83d\ude00"`, "😀"},
	{"surrogate pair upper hex", `"\uD83D\uDE00"`, "😀"},
	{"escaped nul", `"\u0000"`, "\x00"},
	{"noncharacter escape", `"\uffff"`, "\uffff"},
	{"escaped replacement character", `"\ufffd"`, "\ufffd"},
	{"raw multibyte utf8", `"é€😀"`, "é€😀"},
	{"raw replacement character", "\"\uFFFD\"", "\uFFFD"},
	{"raw line separator", "\"\u2028\"", "\u2028"},
	{"raw DEL", "\"\x7f\"", "\x7f"},
	{"raw and escaped text mixed", `"é\n€\u00e9x"`, "é\n€éx"},
	{"escaped key", `{"\u0061b":1}`, obj{"ab": num("1")}},
	{"empty key", `{"":1}`, obj{"": num("1")}},
	// encoding/json v1 folds with strings.EqualFold, which keeps '_' and
	// '-' significant and uses simple (one rune to one rune) folding.
	{"underscore and dash are not folded", `{"ab":1,"a_b":2,"a-b":3}`, obj{"ab": num("1"), "a_b": num("2"), "a-b": num("3")}},
	{"sharp s is not ss", `{"ss":1,"ß":2}`, obj{"ss": num("1"), "ß": num("2")}},
	{"dotted and dotless i are not i", `{"i":1,"İ":2,"ı":3}`, obj{"i": num("1"), "İ": num("2"), "ı": num("3")}},
	{"kelvin sign is not kk", `{"kk":1,"\u212a":2}`, obj{"kk": num("1"), "\u212a": num("2")}},
	{"accents are significant", `{"e":1,"é":2}`, obj{"e": num("1"), "é": num("2")}},
	{"ascii keys of equal length", `{"ab":1,"ac":2,"AD":3}`, obj{"ab": num("1"), "ac": num("2"), "AD": num("3")}},
	{"many distinct keys", manyKeys(100) + "}", manyKeysValue(100)},
	{"nine keys", manyKeys(9) + "}", manyKeysValue(9)},
	{"depth 64 arrays", nestArrays(64), nestArraysValue(64)},
	{"depth 64 objects", nestObjects(64), nestObjectsValue(64)},
	{"long string", `"` + strings.Repeat("x", 1000) + `"`, strings.Repeat("x", 1000)},
}

// The reasons encoding/json does not share: it accepts these texts, and that
// is exactly why they are refused here.
var differentialReasons = map[string]bool{
	reasonDuplicateKey:   true,
	reasonCaseVariantKey: true,
	reasonProtoKey:       true,
	reasonInvalidUTF8:    true,
	reasonSurrogate:      true,
	reasonTooDeep:        true,
}

// refuseCases are named after what they attack.
var refuseCases = []refuseCase{
	// Framing.
	{"empty input", ``, reasonEmpty, 0},
	{"only whitespace", " \n", reasonEmpty, 2},
	{"bom", "\xEF\xBB\xBF{}", reasonBOM, 0},
	{"bom after whitespace", " \xEF\xBB\xBF{}", reasonUnexpectedChar, 1},
	{"nbsp is not whitespace", "\u00a0{}", reasonUnexpectedChar, 0},
	{"form feed is not whitespace", "\f{}", reasonUnexpectedChar, 0},
	{"vertical tab is not whitespace", "\v{}", reasonUnexpectedChar, 0},
	{"two values", `{} {}`, reasonTrailingData, 3},
	{"two numbers", `1 2`, reasonTrailingData, 2},
	{"concatenated objects", `{"a":1}{"a":2}`, reasonTrailingData, 7},
	{"trailing garbage", `{}x`, reasonTrailingData, 2},
	{"trailing nul", "{}\x00", reasonTrailingData, 2},
	{"invalid utf8 after value", "[1]\xff", reasonTrailingData, 3},
	{"invalid utf8 as value", "[\xff]", reasonUnexpectedChar, 1},
	{"close bracket", `]`, reasonUnexpectedChar, 0},

	// Separators.
	{"trailing comma", `[1,]`, reasonTrailingComma, 2},
	{"trailing comma in object", `{"a":1,}`, reasonTrailingComma, 6},
	{"trailing comma before space", `[1 , ]`, reasonTrailingComma, 3},
	{"leading comma", `[,1]`, reasonUnexpectedChar, 1},
	{"double comma", `[1,,2]`, reasonUnexpectedChar, 3},
	{"missing comma", `[1 2]`, reasonArraySep, 3},
	{"missing comma in object", `{"a":1 "b":2}`, reasonObjectSep, 7},
	{"missing colon", `{"a" 1}`, reasonColon, 5},
	{"equals for colon", `{"a"=1}`, reasonColon, 4},
	{"missing value", `{"a":}`, reasonUnexpectedChar, 5},
	{"semicolon separator", `[1;2]`, reasonArraySep, 2},

	// Comments and non-JSON syntax.
	{"line comment", "{\"a\":1 // c\n}", reasonObjectSep, 7},
	{"block comment", `/* c */ {}`, reasonUnexpectedChar, 0},
	{"hash comment", "# c\n{}", reasonUnexpectedChar, 0},
	{"comment after value", `{} // c`, reasonTrailingData, 3},
	{"single quoted key", `{'a':1}`, reasonKeyNotString, 1},
	{"single quoted value", `{"a":'b'}`, reasonUnexpectedChar, 5},
	{"unquoted key", `{a:1}`, reasonKeyNotString, 1},
	{"number key", `{1:1}`, reasonKeyNotString, 1},
	{"python None", `None`, reasonUnexpectedChar, 0},
	{"capitalised true", `True`, reasonUnexpectedChar, 0},
	{"truncated null", `nul`, reasonInvalidLiteral, 0},
	{"misspelt false", `fals3`, reasonInvalidLiteral, 0},
	{"null with extra letter", `nulll`, reasonTrailingData, 4},

	// Numbers.
	{"leading zero", `01`, reasonLeadingZero, 0},
	{"negative leading zero", `-01`, reasonLeadingZero, 0},
	{"leading zero in array", `[00]`, reasonLeadingZero, 1},
	{"plus sign", `+1`, reasonUnexpectedChar, 0},
	{"leading dot", `.5`, reasonUnexpectedChar, 0},
	{"trailing dot", `1.`, reasonInvalidNumber, 2},
	{"dot before exponent", `1.e5`, reasonInvalidNumber, 2},
	{"empty exponent", `1e`, reasonInvalidNumber, 2},
	{"signed empty exponent", `1e+`, reasonInvalidNumber, 3},
	{"minus alone", `-`, reasonInvalidNumber, 1},
	{"minus space", `- 1`, reasonInvalidNumber, 1},
	{"hex", `0x1F`, reasonTrailingData, 1},
	{"hex in array", `[0x1F]`, reasonArraySep, 2},
	{"NaN", `NaN`, reasonUnexpectedChar, 0},
	{"Infinity", `Infinity`, reasonUnexpectedChar, 0},
	{"negative Infinity", `-Infinity`, reasonInvalidNumber, 1},

	// Strings.
	{"raw tab in string", "\"a\tb\"", reasonControlChar, 2},
	{"raw newline in string", "\"a\nb\"", reasonControlChar, 2},
	{"raw nul in string", "\"\x00\"", reasonControlChar, 1},
	{"raw unit separator in string", "\"\x1f\"", reasonControlChar, 1},
	{"raw control char after escape", "\"\\n\x01\"", reasonControlChar, 3},
	{"raw control char in key", "{\"a\x01\":1}", reasonControlChar, 3},
	{"invalid escape x", `"\x41"`, reasonInvalidEscape, 1},
	{"invalid escape a", `"\a"`, reasonInvalidEscape, 1},
	{"escaped single quote", `"\'"`, reasonInvalidEscape, 1},
	{"uppercase U escape", `"\U0041"`, reasonInvalidEscape, 1},
	{"short u escape", `"\u12"`, reasonInvalidEscape, 1},
	{"short u escape at end", `"\u12`, reasonInvalidEscape, 1},
	{"non-hex u escape", `"\u12G4"`, reasonInvalidEscape, 1},
	{"backslash at end", `"\`, reasonUnterminated, 2},
	{"unterminated string", `"abc`, reasonUnterminated, 4},
	{"unterminated escaped string", `"a\nb`, reasonUnterminated, 5},
	{"unterminated array", `[1`, reasonEmpty, 2},
	{"unterminated array after comma", `[1,`, reasonEmpty, 3},
	{"unterminated object", `{"a":1`, reasonEmpty, 6},
	{"unterminated object after key", `{"a"`, reasonEmpty, 4},
	{"open brace only", `{`, reasonEmpty, 1},

	// Invalid UTF-8: encoding/json replaces it with U+FFFD.
	{"invalid utf8 in key", "{\"a\xff\":1}", reasonInvalidUTF8, 3},
	{"invalid utf8 in value", "{\"a\":\"\xff\"}", reasonInvalidUTF8, 6},
	{"invalid utf8 after escape", "\"\\n\xff\"", reasonInvalidUTF8, 3},
	{"latin1 byte", "\"caf\xe9\"", reasonInvalidUTF8, 4},
	{"overlong slash", "\"\xc0\xaf\"", reasonInvalidUTF8, 1},
	{"overlong nul", "\"\xc0\x80\"", reasonInvalidUTF8, 1},
	{"utf8 encoded surrogate", "\"\xed\xa0\x80\"", reasonInvalidUTF8, 1},
	{"above U+10FFFF", "\"\xf4\x90\x80\x80\"", reasonInvalidUTF8, 1},
	{"truncated sequence", "\"\xe2\x82\"", reasonInvalidUTF8, 1},
	{"lone continuation byte", "\"\x80\"", reasonInvalidUTF8, 1},

	// Surrogate escapes: Go substitutes U+FFFD, Python keeps the surrogate.
	{"lone high surrogate", `"\ud800"`, reasonSurrogate, 1},
	{"lone low surrogate", `"\udc00"`, reasonSurrogate, 1},
	{"reversed surrogate pair", `"\udc00\ud800"`, reasonSurrogate, 1},
	{"high surrogate then letter escape", `"\ud800\u0041"`, reasonSurrogate, 1},
	{"high surrogate then raw text", `"\ud800abcdef"`, reasonSurrogate, 1},
	{"two high surrogates", `"\ud800\ud800"`, reasonSurrogate, 1},
	{"high surrogate then short escape", `"\ud800\u12"`, reasonSurrogate, 1},
	{"high surrogate then bad escape", `"\ud800\uZZZZ"`, reasonInvalidEscape, 7},
	{"lone high surrogate at end of string", `"a\ud83d"`, reasonSurrogate, 2},
	{"lone surrogate in key", `{"\udfff":1}`, reasonSurrogate, 2},

	// Duplicate keys: parsers differ on which value wins.
	{"duplicate key", `{"a":1,"a":2}`, reasonDuplicateKey, 7},
	{"duplicate key nested", `{"x":{"a":1,"a":2}}`, reasonDuplicateKey, 12},
	{"duplicate key in array element", `[{"a":1},{"b":1,"b":2}]`, reasonDuplicateKey, 16},
	{"duplicate key via escape", `{"a":1,"\u0061":2}`, reasonDuplicateKey, 7},
	{"duplicate key via escaped slash", `{"a/b":1,"a\/b":2}`, reasonDuplicateKey, 9},
	{"duplicate empty key", `{"":1,"":2}`, reasonDuplicateKey, 6},
	{"duplicate key after many keys", manyKeys(20) + `,"k3":0}`, reasonDuplicateKey, len(manyKeys(20)) + 1},
	{"duplicate ninth key", manyKeys(8) + `,"k0":0}`, reasonDuplicateKey, len(manyKeys(8)) + 1},
	{"duplicate key far apart", manyKeys(1000) + `,"k999":0}`, reasonDuplicateKey, len(manyKeys(1000)) + 1},

	// Case-variant keys: a Go upstream decoding into a struct keeps the last.
	{"case-variant key", `{"path":"a","Path":"b"}`, reasonCaseVariantKey, 12},
	{"case-variant key nested", `{"args":{"cmd":"ls","CMD":"rm"}}`, reasonCaseVariantKey, 20},
	{"case-variant key via escape", `{"a":1,"\u0041":2}`, reasonCaseVariantKey, 7},
	{"__proto__ key", `{"path":"a","__proto__":{"file":"secrets"}}`, reasonProtoKey, 12},
	{"__proto__ key nested and escaped", `{"a":[{"__pr\u006fto__":{}}]}`, reasonProtoKey, 7},
	{"constructor.prototype", `{"constructor":{"prototype":{"path":"secrets"}}}`, reasonProtoKey, 47},
	{"__proto__ as a path", `{"a":1,"__proto__.path":"secrets"}`, reasonProtoKey, 7},
	{"constructor.prototype as a path", `{"constructor.prototype.path":"secrets"}`, reasonProtoKey, 1},
	{"case-variant key after many keys", manyKeys(20) + `,"K3":0}`, reasonCaseVariantKey, len(manyKeys(20)) + 1},
	{"kelvin sign key", `{"k":1,"\u212a":2}`, reasonCaseVariantKey, 7},
	{"raw kelvin sign key", "{\"k\":1,\"\u212a\":2}", reasonCaseVariantKey, 7},
	{"kelvin sign in longer key", `{"kind":1,"\u212aind":2}`, reasonCaseVariantKey, 10},
	{"kelvin sign after many keys", manyKeys(20) + `,"\u212a3":0}`, reasonCaseVariantKey, len(manyKeys(20)) + 1},
	{"long s key", `{"s":1,"\u017f":2}`, reasonCaseVariantKey, 7},
	{"long s in key", `{"user":1,"u\u017fer":2}`, reasonCaseVariantKey, 10},
	{"final sigma key", `{"σ":1,"ς":2}`, reasonCaseVariantKey, 8},
	{"non-ascii case-variant key", `{"é":1,"É":2}`, reasonCaseVariantKey, 8},

	// Depth.
	{"depth 65", nestArrays(65), reasonTooDeep, 64},
	{"depth 65 objects", nestObjects(65), reasonTooDeep, 64 * len(`{"a":`)},
	{"deep array 1 MiB", strings.Repeat("[", 1<<20), reasonTooDeep, 64},
	{"deep object 1 MiB", strings.Repeat(`{"a":`, 1<<18), reasonTooDeep, 64 * len(`{"a":`)},
}

// manyKeys returns the unclosed object {"k0":0,"k1":1,...,"k<n-1>":n-1.
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	return b.String()
}

func manyKeysValue(n int) obj {
	m := obj{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = num(fmt.Sprint(i))
	}
	return m
}

func nestArrays(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func nestArraysValue(depth int) any {
	v := arr{}
	for range depth - 1 {
		v = arr{v}
	}
	return v
}

func nestObjects(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "null" + strings.Repeat("}", depth)
}

func nestObjectsValue(depth int) any {
	var v any
	for range depth {
		v = obj{"a": v}
	}
	return v
}

// diffJSON reports how got differs from want, or "" if they are equal.
// equalJSON decides equality; cmp.Diff only renders the report, and only for
// shallow values: cmp aligns slices with an edit script that compares nested
// elements more than once, which takes time exponential in the nesting depth
// (64 levels of one-element arrays would never finish).
func diffJSON(want, got any) string {
	if equalJSON(want, got) {
		return ""
	}
	if nesting(want) <= 12 && nesting(got) <= 12 {
		if d := cmp.Diff(want, got); d != "" {
			return d
		}
	}
	// Too deep for cmp, or of a type decoded JSON never has (cmp would
	// call 1.0 and 1.0 equal).
	return fmt.Sprintf("want %.1000v (%[1]T)\ngot  %.1000v (%[2]T)", want, got)
}

// equalJSON reports whether a and b are the same decoded JSON value, with
// the same types (json.Number is not string) and the same nil-ness of maps
// and slices.
func equalJSON(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case string:
		b, ok := b.(string)
		return ok && a == b
	case json.Number:
		b, ok := b.(json.Number)
		return ok && a == b
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !equalJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !equalJSON(va, vb) {
				return false
			}
		}
		return true
	}
	return false
}

// nesting returns the nesting depth of arrays and objects in v.
func nesting(v any) int {
	depth := 0
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			depth = max(depth, nesting(e))
		}
		return depth + 1
	case map[string]any:
		for _, e := range v {
			depth = max(depth, nesting(e))
		}
		return depth + 1
	}
	return 0
}

// stdDecode decodes data the way a Go upstream would, keeping numbers as
// json.Number.
func stdDecode(data []byte) (any, error) {
	if !json.Valid(data) {
		return nil, errors.New("encoding/json: not valid")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func TestDecodeAccepts(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatalf("Decode(%.80q) = %v", tc.in, err)
			}
			if diff := diffJSON(tc.want, got); diff != "" {
				t.Errorf("Decode(%.80q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range refuseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.in))
			if got != nil {
				t.Errorf("Decode(%.80q) value = %v, want nil", tc.in, got)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%.80q) error = %v (%T), want *Error", tc.in, err, err)
			}
			want := &Error{Offset: tc.offset, Reason: tc.reason}
			if diff := cmp.Diff(want, e); diff != "" {
				t.Errorf("Decode(%.80q) error mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestAcceptMatchesEncodingJSON is the differential test: a Go upstream reads
// every accepted text exactly as Decode does.
func TestAcceptMatchesEncodingJSON(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			std, err := stdDecode([]byte(tc.in))
			if err != nil {
				t.Fatalf("encoding/json refuses %.80q: %v", tc.in, err)
			}
			got, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatalf("Decode(%.80q) = %v", tc.in, err)
			}
			if diff := diffJSON(std, got); diff != "" {
				t.Errorf("Decode(%.80q) differs from encoding/json (-std +strictjson):\n%s", tc.in, diff)
			}
		})
	}
}

// TestRefusalsBeyondEncodingJSON checks that where encoding/json accepts a
// refused text, the refusal is one of the deliberate differential classes
// and not an accident of this grammar.
func TestRefusalsBeyondEncodingJSON(t *testing.T) {
	for _, tc := range refuseCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := stdDecode([]byte(tc.in)); err == nil && !differentialReasons[tc.reason] {
				t.Errorf("encoding/json accepts %.80q, refused for %q", tc.in, tc.reason)
			}
		})
	}
}

func TestDecodeObject(t *testing.T) {
	for _, tc := range acceptCases {
		want, isObj := tc.want.(obj)
		if !isObj {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeObject([]byte(tc.in))
			if err != nil {
				t.Fatalf("DecodeObject(%.80q) = %v", tc.in, err)
			}
			if diff := diffJSON(want, got); diff != "" {
				t.Errorf("DecodeObject(%.80q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestDecodeObjectRefuses(t *testing.T) {
	tests := []refuseCase{
		{"array", `[]`, reasonNotObject, 0},
		{"array holding an object", " [ {} ]", reasonNotObject, 1},
		{"string", `"{}"`, reasonNotObject, 0},
		{"number", `1`, reasonNotObject, 0},
		{"null", `null`, reasonNotObject, 0},
		{"true", `true`, reasonNotObject, 0},
		{"not JSON at all", `a=1`, reasonNotObject, 0},
		{"empty input", ``, reasonEmpty, 0},
		{"bom", "\xEF\xBB\xBF{}", reasonBOM, 0},
		{"duplicate key", `{"a":1,"a":2}`, reasonDuplicateKey, 7},
		{"two objects", `{}{}`, reasonTrailingData, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeObject([]byte(tc.in))
			if got != nil {
				t.Errorf("DecodeObject(%q) value = %v, want nil", tc.in, got)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("DecodeObject(%q) error = %v (%T), want *Error", tc.in, err, err)
			}
			want := &Error{Offset: tc.offset, Reason: tc.reason}
			if diff := cmp.Diff(want, e); diff != "" {
				t.Errorf("DecodeObject(%q) error mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestOptionsMaxDepth(t *testing.T) {
	tests := []struct {
		name     string
		maxDepth int
		in       string
		wantErr  bool
	}{
		{"scalar at depth 1", 1, `1`, false},
		{"one level at depth 1", 1, `[1]`, false},
		{"two levels at depth 1", 1, `[[1]]`, true},
		{"object in array at depth 1", 1, `[{}]`, true},
		{"empty object counts as a level", 2, `{"a":{"b":{}}}`, true},
		{"zero means default, 64 ok", 0, nestArrays(64), false},
		{"zero means default, 65 refused", 0, nestArrays(65), true},
		{"negative means default", -1, nestArrays(65), true},
		{"raised limit", 100, nestArrays(100), false},
		{"raised limit exceeded", 100, nestArrays(101), true},
		{"limit lowered to encoding/json's", 1 << 30, nestArrays(10000), false},
		{"beyond encoding/json's limit", 1 << 30, nestArrays(10001), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Options{MaxDepth: tc.maxDepth}.Decode([]byte(tc.in))
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("Decode with MaxDepth %d: err = %v, want error %v", tc.maxDepth, err, tc.wantErr)
			}
			if err != nil {
				if e := new(Error); !errors.As(err, &e) || e.Reason != reasonTooDeep {
					t.Errorf("err = %v, want reason %q", err, reasonTooDeep)
				}
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	_, err := Decode([]byte(`{"a":1,"A":2}`))
	want := "json: object keys differ only in case at offset 7"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// TestReasonsHoldNoInput checks the Error contract that a reason is fixed
// text: attacker bytes never reach logs or response bodies through it.
func TestReasonsHoldNoInput(t *testing.T) {
	for _, tc := range refuseCases {
		_, err := Decode([]byte(tc.in))
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Decode(%.80q) error = %v, want *Error", tc.in, err)
		}
		if !utf8.ValidString(e.Reason) || strings.ContainsFunc(e.Reason, unicode.IsControl) {
			t.Errorf("reason %q is not plain text", e.Reason)
		}
	}
}

func TestResultDoesNotAliasInput(t *testing.T) {
	data := []byte(`{"key":["value","esc\naped"],"n":12}`)
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	want := obj{"key": arr{"value", "esc\naped"}, "n": num("12")}
	if diff := diffJSON(want, got); diff != "" {
		t.Errorf("result changed with its input (-want +got):\n%s", diff)
	}
}

// TestFoldRune checks, for every rune, the property appendFold relies on:
// foldRune maps each simple-folding orbit to one member of it, and that
// member is the orbit's smallest rune.
func TestFoldRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		f := foldRune(r)
		if !strings.EqualFold(string(r), string(f)) {
			t.Fatalf("foldRune(%U) = %U, not EqualFold to it", r, f)
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if o < f {
				t.Fatalf("foldRune(%U) = %U, but %U is in its orbit", r, f, o)
			}
		}
	}
}

func TestAppendFold(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"path", "PATH", true},
		{"k", "\u212a", true},
		{"s", "\u017f", true},
		{"σ", "ς", true},
		{"Σ", "ς", true},
		{"ss", "ß", false},
		{"a_b", "ab", false},
		{"é", "É", true},
		{"é", "e", false},
		{"", "", true},
	}
	for _, tc := range tests {
		if got := string(appendFold(nil, tc.a)) == string(appendFold(nil, tc.b)); got != tc.want {
			t.Errorf("fold(%q) == fold(%q) is %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := strings.EqualFold(tc.a, tc.b); got != tc.want {
			t.Errorf("test case is wrong: EqualFold(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// TestAddKeyHashCollision forces what a random 64-bit seed makes practically
// impossible: a new key whose folded hash is already taken by a different
// key. The full scan behind it must still find (or rule out) a match.
func TestAddKeyHashCollision(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		alias   string // the index entry for key's hash points at this key instead
		wantErr string
	}{
		{"colliding key is a case variant of another key", "K3", "k7", reasonCaseVariantKey},
		{"colliding key is a duplicate of another key", "k3", "k7", reasonDuplicateKey},
		{"colliding key is new", "fresh", "k2", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(nil, DefaultMaxDepth)
			var index map[uint64]int
			var err error
			pos := map[string]int{}
			for i := range linearKeys + 2 {
				k := fmt.Sprintf("k%d", i)
				pos[k] = i
				if index, err = d.addKey(0, index, keyEntry{k, true}, 0); err != nil {
					t.Fatal(err)
				}
			}
			if index == nil {
				t.Fatalf("no index after %d keys", len(d.keys))
			}
			index[d.foldHash(tc.key)] = pos[tc.alias]

			_, err = d.addKey(0, index, keyEntry{tc.key, true}, 42)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("addKey(%q) = %v, want nil", tc.key, err)
				}
				return
			}
			want := &Error{Offset: 42, Reason: tc.wantErr}
			if diff := cmp.Diff(error(want), err); diff != "" {
				t.Errorf("addKey(%q) mismatch (-want +got):\n%s", tc.key, diff)
			}
		})
	}
}

// TestEqualJSON keeps the differential tests honest: the helper they rely on
// must tell apart what encoding/json and Decode could disagree on.
func TestEqualJSON(t *testing.T) {
	tests := []struct {
		name string
		a, b any
		want bool
	}{
		{"same nested value", obj{"a": arr{num("1"), "x", nil, true}}, obj{"a": arr{num("1"), "x", nil, true}}, true},
		{"number is not string", num("1"), "1", false},
		{"number literal matters", num("1.0"), num("1"), false},
		{"nil map is not empty map", obj(nil), obj{}, false},
		{"nil slice is not empty slice", arr(nil), arr{}, false},
		{"null is not false", nil, false, false},
		{"missing key", obj{"a": nil}, obj{"b": nil}, false},
		{"extra element", arr{num("1")}, arr{num("1"), num("1")}, false},
		{"float64 is not a decoded type", 1.0, 1.0, false},
		{"deep equal arrays", nestArraysValue(1000), nestArraysValue(1000), true},
		{"deep arrays of different depth", nestArraysValue(1000), nestArraysValue(999), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := equalJSON(tc.a, tc.b); got != tc.want {
				t.Errorf("equalJSON = %v, want %v", got, tc.want)
			}
			if got := diffJSON(tc.a, tc.b) == ""; got != tc.want {
				t.Errorf("diffJSON reports equal = %v, want %v", got, tc.want)
			}
		})
	}
}
