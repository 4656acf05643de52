// Package strictjson decodes JSON texts so strictly that no two reasonable
// JSON parsers could read an accepted text differently.
//
// toolgate evaluates a tool call's JSON body with a policy and then forwards
// the same bytes to an upstream written in any language. Wherever parsers
// disagree about what a text means, the policy could approve one reading while
// the upstream executes another. So this package does not pick a reading: it
// refuses the text, and the proxy answers 400. It refuses:
//
//   - everything RFC 8259 forbids: trailing commas, comments, single quotes,
//     unquoted keys, leading zeros, "+1", ".5", "1.", hex, NaN and Infinity,
//     unescaped control characters (U+0000–U+001F) in strings, invalid
//     escapes, a leading byte order mark, data after the value, empty input;
//   - invalid UTF-8 anywhere, because Go's encoding/json silently replaces it
//     with U+FFFD while other parsers reject it or keep the raw bytes;
//   - \u escapes that leave a lone or mis-ordered UTF-16 surrogate, for the
//     same reason (Go substitutes U+FFFD, Python keeps the surrogate);
//   - duplicate keys in one object at any depth, compared after unescaping,
//     because some parsers keep the first value and others the last;
//   - keys in one object that are equal under [strings.EqualFold] ("path" and
//     "Path", "k" and the Kelvin sign "\u212a"), because Go's encoding/json
//     matches struct fields case-insensitively and keeps the last match, so a
//     Go upstream would read {"path":"a","Path":"b"} as path "b" while a
//     policy reading the object as a map sees both;
//   - a "__proto__" key at any depth (escaped or not), and a "constructor"
//     object holding "prototype", or a key that spells either as a path
//     ("__proto__.x", "constructor.prototype.x", which "unflatten"
//     libraries split): JSON.parse keeps them as ordinary keys,
//     but a JavaScript upstream that copies or merges the object
//     (Object.assign, a for-in copy, a deep merge) makes the first's value
//     the copy's prototype, and a naive deep merge writes the second into
//     Object.prototype, whose members every object then reads as its own;
//   - nesting of arrays and objects deeper than [Options.MaxDepth].
//
// Every text it accepts is also accepted by encoding/json, and decodes to the
// same value that encoding/json produces with
// [encoding/json.Decoder.UseNumber]: objects are map[string]any, arrays
// []any, numbers [encoding/json.Number] holding the literal exactly as
// written, strings string, true and false bool, null nil.
//
// What it does not refuse, unless [Options.RefuseLossyNumbers] says so:
// numbers other parsers would round (integers beyond 2^53 in JavaScript, 1e400
// beyond float64) are kept as exact literals for the policy to judge. Escaped
// U+0000 and noncharacters are valid JSON. It
// does not bound the size of its input either; callers limit bodies (with
// [net/http.MaxBytesReader]) before decoding.
package strictjson

import (
	"strconv"
	"strings"
)

// DefaultMaxDepth is the nesting limit used when [Options.MaxDepth] is zero.
// Tool arguments are shallow; 64 levels leaves ample room while keeping the
// recursion of the decoder short.
const DefaultMaxDepth = 64

// maxDepthLimit is encoding/json's own nesting limit (golang/go#31789). A
// larger Options.MaxDepth is lowered to it: deeper texts would be refused by a
// Go upstream anyway, and it bounds the decoder's recursion.
const maxDepthLimit = 10000

// Reasons given in [Error.Reason]. They are fixed text and never contain bytes
// of the input, so an Error can be logged or returned to a client as is.
const (
	reasonEmpty          = "unexpected end of input"
	reasonBOM            = "byte order mark"
	reasonTrailingData   = "data after top-level value"
	reasonNotObject      = "top level is not an object"
	reasonUnexpectedChar = "invalid character looking for value"
	reasonTooDeep        = "nesting too deep"
	reasonTrailingComma  = "trailing comma"
	reasonArraySep       = "expected ',' or ']' after array element"
	reasonObjectSep      = "expected ',' or '}' after object value"
	reasonKeyNotString   = "object key is not a string"
	reasonColon          = "expected ':' after object key"
	reasonDuplicateKey   = "duplicate object key"
	reasonCaseVariantKey = "object keys differ only in case"
	reasonProtoKey       = "object key __proto__, or constructor.prototype"
	reasonInvalidUTF8    = "invalid UTF-8"
	reasonControlChar    = "control character in string"
	reasonUnterminated   = "unterminated string"
	reasonInvalidEscape  = "invalid escape in string"
	reasonSurrogate      = "unpaired UTF-16 surrogate escape"
	reasonInvalidNumber  = "invalid number"
	reasonLeadingZero    = "leading zero in number"
	reasonLossyNumber    = "number a float64 reads as another value"
	reasonInvalidLiteral = "invalid literal"
)

// Error reports why and where a text was refused.
type Error struct {
	// Offset is the byte offset in the input at which the problem was found:
	// the start of the offending token, or len(input) for a truncated text.
	Offset int
	// Reason is one of a small fixed set of descriptions, such as
	// "duplicate object key". It never contains bytes of the input, so it
	// is safe to log, to return to a client, or to use as a metric label.
	Reason string
}

// Error returns "json: <reason> at offset <offset>".
func (e *Error) Error() string {
	return "json: " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

func errorAt(offset int, reason string) *Error {
	return &Error{Offset: offset, Reason: reason}
}

// Options configures decoding. The zero value is ready to use and is what
// [Decode] and [DecodeObject] use.
type Options struct {
	// MaxDepth is the deepest nesting of arrays and objects accepted: with
	// MaxDepth 1, [1] is accepted and [[1]] is refused. Zero or less means
	// DefaultMaxDepth; values above 10000 (encoding/json's own limit) are
	// treated as 10000.
	MaxDepth int
	// RefuseLossyNumbers refuses number literals whose float64 reading
	// is another decimal value (9007199254740993, 999.99999999999999999,
	// 1e400): a policy and an upstream that read numbers as float64 and
	// one that reads them exactly would see two numbers. Literals that
	// only spell the same value otherwise (1.0, 1e2, 0.1) pass.
	RefuseLossyNumbers bool
}

// Decode parses one JSON text strictly (see the package documentation for
// what it refuses). Objects become map[string]any, arrays []any, numbers
// [encoding/json.Number] holding the exact literal, strings string, true and
// false bool, null nil. Empty arrays and objects are non-nil.
//
// Any refusal is returned as an *[Error] and a nil value. The result shares
// no memory with data, so the caller may reuse data; the strings in it are
// cut from one copy of data, so keeping any of them keeps that copy alive.
// Decode is safe for concurrent use.
func Decode(data []byte) (any, error) {
	return Options{}.Decode(data)
}

// DecodeObject is [Decode] for a text whose top level must be an object. A
// text whose top level is anything else is refused with the reason
// "top level is not an object" before the rest of it is read.
func DecodeObject(data []byte) (map[string]any, error) {
	return Options{}.DecodeObject(data)
}

// Decode is the package-level [Decode] with o's limits.
func (o Options) Decode(data []byte) (any, error) {
	return o.decode(data, false)
}

// DecodeObject is the package-level [DecodeObject] with o's limits.
func (o Options) DecodeObject(data []byte) (map[string]any, error) {
	v, err := o.decode(data, true)
	if err != nil {
		return nil, err
	}
	// decode checked that the first token opens an object.
	return v.(map[string]any), nil
}

func (o Options) maxDepth() int {
	switch {
	case o.MaxDepth <= 0:
		return DefaultMaxDepth
	case o.MaxDepth > maxDepthLimit:
		return maxDepthLimit
	}
	return o.MaxDepth
}

func (o Options) decode(input []byte, wantObject bool) (any, error) {
	d := newDecoder(input, o.maxDepth())
	d.refuseLossy = o.RefuseLossyNumbers
	defer d.release()
	data := d.data

	// A BOM is not whitespace in RFC 8259 and parsers disagree on skipping
	// it; name it, since it is the likeliest non-whitespace prefix.
	if strings.HasPrefix(data, "\xEF\xBB\xBF") {
		return nil, errorAt(0, reasonBOM)
	}
	i := skipSpace(data, 0)
	if i == len(data) {
		return nil, errorAt(i, reasonEmpty)
	}
	if wantObject && data[i] != '{' {
		return nil, errorAt(i, reasonNotObject)
	}
	v, next, err := d.value(i, 0)
	if err != nil {
		return nil, err
	}
	if next = skipSpace(data, next); next != len(data) {
		return nil, errorAt(next, reasonTrailingData)
	}
	return v, nil
}

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace. Only the four RFC 8259 whitespace bytes count: other
// parsers accept more (form feed, NBSP), which is one more reason to refuse.
func skipSpace(data string, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
