package strictjson

import (
	"encoding/json"
	"strings"
	"sync"
)

// decoder holds the state of one Decode call. It reads the input in a single
// pass by recursive descent; recursion is bounded because array and object
// check the depth before reading their first element.
//
// The input is converted to a string once, and every unescaped string, key
// and number literal in the result is a substring of it: one allocation for
// all of them instead of one each. (The price: a string kept from the result
// keeps the whole copy alive. toolgate bounds bodies and holds each one until
// it is forwarded anyway.)
//
// Arrays and objects collect their elements on shared stacks (vals, keys) and
// copy them out when they close, so every []any and map is allocated once at
// its final size, and an object's keys sit next to each other for the
// duplicate check. Decoders are pooled so the stacks and scratch buffers are
// reused across calls.
type decoder struct {
	data        string
	maxDepth    int
	refuseLossy bool

	vals []any      // elements of the open arrays and objects, innermost last
	keys []keyEntry // keys of the open objects, innermost last
	buf  []byte     // scratch for unescaping a string
	fold []byte     // scratch for folding a key (see foldHash)
}

// keyEntry is an object key after unescaping.
type keyEntry struct {
	s     string
	ascii bool // s has no byte >= 0x80; lets the duplicate check skip EqualFold
}

var decoderPool = sync.Pool{New: func() any { return new(decoder) }}

// maxPooledStack bounds the stacks a pooled decoder keeps, so one huge body
// does not pin its memory in the pool for good.
const maxPooledStack = 1 << 12

func newDecoder(data []byte, maxDepth int) *decoder {
	d := decoderPool.Get().(*decoder)
	d.data, d.maxDepth = string(data), maxDepth
	return d
}

// release returns d to the pool. d must not be used afterwards.
func (d *decoder) release() {
	if cap(d.vals) > maxPooledStack || cap(d.keys) > maxPooledStack || cap(d.buf) > maxPooledStack*16 {
		return
	}
	// Drop every reference into this request's values, so the pool does not
	// keep the body (or anything decoded from it) alive.
	clear(d.vals[:cap(d.vals)])
	clear(d.keys[:cap(d.keys)])
	*d = decoder{vals: d.vals[:0], keys: d.keys[:0], buf: d.buf[:0], fold: d.fold[:0]}
	decoderPool.Put(d)
}

// value decodes the value starting at data[i], which is not whitespace. depth
// is the nesting depth of the array or object that contains it (0 at the top
// level). It returns the value and the offset just past it.
func (d *decoder) value(i, depth int) (any, int, error) {
	data := d.data
	if i >= len(data) {
		return nil, i, errorAt(i, reasonEmpty)
	}
	switch data[i] {
	case '{':
		return d.object(i, depth+1)
	case '[':
		return d.array(i, depth+1)
	case '"':
		s, _, next, err := d.str(i)
		if err != nil {
			return nil, next, err
		}
		return s, next, nil
	case 't':
		return d.literal(i, "true", true)
	case 'f':
		return d.literal(i, "false", false)
	case 'n':
		return d.literal(i, "null", nil)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return d.number(i)
	}
	return nil, i, errorAt(i, reasonUnexpectedChar)
}

func (d *decoder) literal(i int, lit string, v any) (any, int, error) {
	if len(d.data)-i >= len(lit) && d.data[i:i+len(lit)] == lit {
		return v, i + len(lit), nil
	}
	return nil, i, errorAt(i, reasonInvalidLiteral)
}

// array decodes the array whose '[' is at data[i]; depth counts it.
func (d *decoder) array(i, depth int) (any, int, error) {
	// Checked before descending, so a text of a million '[' costs
	// MaxDepth frames, not a million.
	if depth > d.maxDepth {
		return nil, i, errorAt(i, reasonTooDeep)
	}
	data := d.data
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return []any{}, i + 1, nil
	}
	base := len(d.vals)
	for {
		v, next, err := d.value(i, depth)
		if err != nil {
			return nil, next, err
		}
		d.vals = append(d.vals, v)
		i = skipSpace(data, next)
		if i >= len(data) {
			return nil, i, errorAt(i, reasonEmpty)
		}
		switch data[i] {
		case ',':
			comma := i
			if i = skipSpace(data, i+1); i < len(data) && data[i] == ']' {
				return nil, comma, errorAt(comma, reasonTrailingComma)
			}
		case ']':
			arr := make([]any, len(d.vals)-base)
			copy(arr, d.vals[base:])
			d.vals = d.vals[:base]
			return arr, i + 1, nil
		default:
			return nil, i, errorAt(i, reasonArraySep)
		}
	}
}

// object decodes the object whose '{' is at data[i]; depth counts it.
func (d *decoder) object(i, depth int) (any, int, error) {
	if depth > d.maxDepth {
		return nil, i, errorAt(i, reasonTooDeep)
	}
	data := d.data
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return map[string]any{}, i + 1, nil
	}
	kbase, vbase := len(d.keys), len(d.vals)
	var index map[uint64]int // see addKey; nil while the object is small
	for {
		if i >= len(data) {
			return nil, i, errorAt(i, reasonEmpty)
		}
		if data[i] != '"' {
			return nil, i, errorAt(i, reasonKeyNotString)
		}
		s, ascii, next, err := d.str(i)
		if err != nil {
			return nil, next, err
		}
		if protoKey(s) {
			return nil, i, errorAt(i, reasonProtoKey)
		}
		if index, err = d.addKey(kbase, index, keyEntry{s, ascii}, i); err != nil {
			return nil, i, err
		}
		i = skipSpace(data, next)
		if i >= len(data) {
			return nil, i, errorAt(i, reasonEmpty)
		}
		if data[i] != ':' {
			return nil, i, errorAt(i, reasonColon)
		}
		i = skipSpace(data, i+1)
		v, next, err := d.value(i, depth)
		if err != nil {
			return nil, next, err
		}
		d.vals = append(d.vals, v)
		i = skipSpace(data, next)
		if i >= len(data) {
			return nil, i, errorAt(i, reasonEmpty)
		}
		switch data[i] {
		case ',':
			comma := i
			if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
				return nil, comma, errorAt(comma, reasonTrailingComma)
			}
		case '}':
			keys, vals := d.keys[kbase:], d.vals[vbase:]
			// addKey refused every duplicate, so the map holds exactly
			// len(keys) entries.
			m := make(map[string]any, len(keys))
			for j, k := range keys {
				m[k.s] = vals[j]
			}
			d.keys, d.vals = d.keys[:kbase], d.vals[:vbase]
			if c, ok := m["constructor"].(map[string]any); ok {
				if _, ok := c["prototype"]; ok {
					return nil, i, errorAt(i, reasonProtoKey)
				}
			}
			return m, i + 1, nil
		default:
			return nil, i, errorAt(i, reasonObjectSep)
		}
	}
}

// number decodes the number starting at data[i] and returns it as the exact
// literal. Grammar (RFC 8259 §6):
//
//	[ '-' ] ( '0' | [1-9][0-9]* ) [ '.' [0-9]+ ] [ ( 'e' | 'E' ) [ '+' | '-' ] [0-9]+ ]
func (d *decoder) number(i int) (any, int, error) {
	data := d.data
	start := i
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
		// "01" is octal to some parsers and 1 to others.
		if i < len(data) && isDigit(data[i]) {
			return nil, start, errorAt(start, reasonLeadingZero)
		}
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return nil, i, errorAt(i, reasonInvalidNumber)
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return nil, i, errorAt(i, reasonInvalidNumber)
		}
		i = skipDigits(data, i+1)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return nil, i, errorAt(i, reasonInvalidNumber)
		}
		i = skipDigits(data, i+1)
	}
	if d.refuseLossy && lossy(data[start:i]) {
		return nil, start, errorAt(start, reasonLossyNumber)
	}
	return json.Number(data[start:i]), i, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(data string, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

// protoKey reports a key that is __proto__, or that an "unflatten" library
// (flat, dot-object, qs-style paths) splits into a path through __proto__
// or constructor.prototype: "__proto__.x", "a[__proto__]",
// "constructor.prototype.x".
func protoKey(s string) bool {
	return strings.Contains(s, "__proto__") ||
		strings.Contains(s, "constructor") && strings.Contains(s, "prototype")
}
