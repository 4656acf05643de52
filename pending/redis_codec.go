package pending

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// reply splits a per-call script's reply into its code and call.
func reply(id string, v []any) (code string, c Call, err error) {
	if len(v) == 0 {
		return "", Call{}, errors.New("pending: empty reply from Redis")
	}
	code, _ = v[0].(string)
	if len(v) > 2 {
		id, _ = v[2].(string) // attached: the call that was found
	}
	if len(v) > 1 {
		c, err = decodeRecord(id, v[1])
	}
	return code, c, err
}

// decodeRecord decodes a call a script replied: its stored value (see
// value in redis_scripts.go) or some of its fields (field, value, …).
func decodeRecord(id string, v any) (Call, error) {
	if stored, ok := v.(string); ok {
		var bad error
		c, err := decodeCall(id, func(yield func(string, string) bool) {
			bad = decodeStored(stored, yield)
		})
		if err == nil && bad != nil {
			err = fmt.Errorf("pending: decoding call %s: %w", id, bad)
		}
		return c, err
	}
	flat, ok := v.([]any)
	if !ok || len(flat)%2 != 0 {
		return Call{}, fmt.Errorf("pending: unexpected call encoding %T", v)
	}
	return decodeCall(id, func(yield func(string, string) bool) {
		for i := 0; i < len(flat); i += 2 {
			f, _ := flat[i].(string)
			v, _ := flat[i+1].(string)
			if !yield(f, v) {
				return
			}
		}
	})
}

// decodeList decodes a reply {id, call, id, call, …}.
func decodeList(v []any) ([]Call, error) { return decodePairs(v, "list", decodeRecord) }

// decodePairs decodes a reply {id, record, id, record, …} of what records.
func decodePairs[T any](v []any, what string, decode func(id string, v any) (T, error)) ([]T, error) {
	if len(v)%2 != 0 {
		return nil, errors.New("pending: unexpected " + what + " reply")
	}
	var out []T
	for i := 0; i < len(v); i += 2 {
		id, _ := v[i].(string)
		r, err := decode(id, v[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// decodeCall builds a call from its fields (see redis_scripts.go).
func decodeCall(id string, fields func(yield func(field, value string) bool)) (Call, error) {
	// One value the fields are decoded into, not locals that the loop
	// body (a closure) captures: each of those was an allocation of every
	// call decoded.
	d := &callDecoder{c: Call{ID: id}}
	fields(d.field)
	if d.err != nil {
		return Call{}, fmt.Errorf("pending: decoding call %s: %w", id, d.err)
	}
	c := d.c
	if d.hasResult {
		res := d.res
		c.Result = &res
	}
	if d.same {
		c.AttachKey = c.ArgsKey
	}
	return c, nil
}

// callDecoder is a call being decoded (decodeCall).
type callDecoder struct {
	c         Call
	res       Result
	hasResult bool
	same      bool // "aa": AttachKey is ArgsKey
	err       error
}

func (d *callDecoder) ms(v string) time.Time {
	n, e := strconv.ParseInt(v, 10, 64)
	d.err = cmpErr(d.err, e)
	return time.UnixMilli(n)
}

// field decodes one field; it always asks for the next.
func (d *callDecoder) field(f, v string) bool {
	c, res := &d.c, &d.res
	var err error
	switch f {
	case "st":
		c.State = State(v)
	case "aa":
		d.same = true
	case "ak":
		c.AttachKey = unpackDigest(v)
	case "ag":
		c.ArgsKey = unpackDigest(v)
	case "ad":
		c.ArgsDigest = unpackDigest(v)
	case "sb":
		c.Subject = v
	case "up":
		c.Upstream = v
	case "tl":
		c.Tool = v
	case "pr":
		c.Principal = v
	case "rq":
		c.Request = []byte(v)
	case "rd":
		c.RequestDigest = unpackDigest(v)
	case "in":
		c.Info = []byte(v)
	case "bf":
		c.Brief = []byte(v)
	case "ca":
		c.CreatedAt = d.ms(v)
	case "ea":
		c.ExpiresAt = d.ms(v)
	case "by":
		c.DecidedBy = v
	case "cm":
		c.Comment = v
	case "da":
		c.DecidedAt = d.ms(v)
	case "qm":
		n, e := decodeInts(v)
		c.Quorum, err = n, cmpErr(err, e)
	case "ap":
		as, e := decodeApprovals(v)
		c.Approvals, err = as, cmpErr(err, e)
	case "fe":
		n, e := strconv.ParseInt(v, 10, 64)
		c.Fence, err = n, cmpErr(err, e)
	case "lu":
		c.LeaseUntil = d.ms(v)
	case "rs":
		n, e := strconv.Atoi(v)
		res.Status, d.hasResult, err = n, true, cmpErr(err, e)
	case "rh":
		err = cmpErr(err, json.Unmarshal([]byte(v), &res.Header))
	case "rb":
		res.Body = []byte(v)
	case "rt":
		res.Truncated = v == "1"
	case "dl":
		c.Delivered = v == "1"
	}
	d.err = cmpErr(d.err, err)
	return true
}

// storedResult is res as a finish stores it and Get reads it back (rs,
// rh, rb and rt): an empty header or body is none, and the header is what
// its JSON, header, decodes to. That is a copy of res.Header unless a
// name or value is not valid UTF-8 (JSON has replaced those bytes), which
// only decoding shows. The body is res.Body itself, not a copy: a result
// may be as large as the largest one kept, and the caller of Finish
// already holds it (see RedisStore.Finish).
func storedResult(res Result, header []byte) (*Result, error) {
	r := &Result{Status: res.Status, Truncated: res.Truncated}
	if len(res.Body) > 0 {
		r.Body = res.Body
	}
	if len(res.Header) == 0 {
		return r, nil
	}
	if !validHeader(res.Header) {
		return r, json.Unmarshal(header, &r.Header)
	}
	r.Header = make(map[string][]string, len(res.Header))
	for k, v := range res.Header {
		r.Header[k] = slices.Clone(v) // nil stays nil (null), empty stays empty ([])
	}
	return r, nil
}

// validHeader reports whether every name and value of h is valid UTF-8:
// what JSON keeps as it is.
func validHeader(h map[string][]string) bool {
	for k, vs := range h {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

// packDigest stores a digest of 64 lowercase hex digits (as the proxy
// makes them) as its 32 bytes behind a 0 byte: 31 B less in every call.
// Anything else is stored as it is. Attach keys are named by the hex
// digest still (the scripts' attachname turns a packed one back): an
// earlier release looks them up by the same names.
func packDigest(d string) string {
	if len(d) != 2*sha256.Size || strings.ToLower(d) != d {
		return d
	}
	raw, err := hex.DecodeString(d)
	if err != nil {
		return d
	}
	return "\x00" + string(raw)
}

// unpackDigest undoes packDigest.
func unpackDigest(v string) string {
	if len(v) == 1+sha256.Size && v[0] == 0 {
		return hex.EncodeToString([]byte(v[1:]))
	}
	return v
}

// cmpErr keeps the first error.
func cmpErr(old, e error) error {
	if old != nil {
		return old
	}
	return e
}

// parkedCall is the call a park stored for c, as Get reads it back, from
// the times the park script replied (created, expires: ms on Redis'
// clock): the script stores c's fields as Park sends them, and nothing
// else but its state and those times. Brief, Info and Request are
// sliced out of data (largeFields), a copy of them, so the call shares
// no bytes with c; an empty one is none, as Get reads it.
func parkedCall(c Call, data []byte, created, expires any) (Call, error) {
	cs, _ := created.(string)
	es, _ := expires.(string)
	ca, err1 := strconv.ParseInt(cs, 10, 64)
	ea, err2 := strconv.ParseInt(es, 10, 64)
	if err := cmp.Or(err1, err2); err != nil {
		return Call{}, fmt.Errorf("pending: unexpected park reply: %w", err)
	}
	large := func(n int) []byte {
		b := data[:n:n]
		data = data[n:]
		if n == 0 {
			return nil
		}
		return b
	}
	p := Call{
		ID: c.ID, State: Waiting,
		// as stored by packDigest and read by unpackDigest
		AttachKey: unpackDigest(c.AttachKey), ArgsKey: unpackDigest(c.ArgsKey), ArgsDigest: unpackDigest(c.ArgsDigest),
		Subject: c.Subject, Upstream: c.Upstream, Tool: c.Tool, Principal: c.Principal,
		RequestDigest: unpackDigest(c.RequestDigest),
		Brief:         large(len(c.Brief)), Info: large(len(c.Info)), Request: large(len(c.Request)),
		CreatedAt: time.UnixMilli(ca), ExpiresAt: time.UnixMilli(ea),
	}
	if len(c.Quorum) > 0 {
		p.Quorum = slices.Clone(c.Quorum)
	}
	return p, nil
}

// largeFields is how Park hands a call's Brief, Info and Request to its
// script, which stores them as they are: their lengths "<bf> <in> <rq>",
// and the three one after another.
func largeFields(c Call) (lens string, data []byte) {
	data = make([]byte, 0, len(c.Brief)+len(c.Info)+len(c.Request))
	data = append(append(append(data, c.Brief...), c.Info...), c.Request...)
	return strconv.Itoa(len(c.Brief)) + " " + strconv.Itoa(len(c.Info)) + " " + strconv.Itoa(len(c.Request)), data
}

// decodeBody yields the fields of an earlier release's body key (the
// lengths of largeFields, a newline, then its data) as bf, in and rq; nothing for a body that is missing or
// malformed.
func decodeBody(b string, yield func(field, value string) bool) {
	head, rest, ok := strings.Cut(b, "\n")
	if !ok {
		return
	}
	decodeLarge(head, rest, bigFields[:3], yield)
}

// bigFields are the large fields of a call's key, after its header, in
// this order (see save in redis_scripts.go).
var bigFields = [...]string{"bf", "in", "rq", "rb"}

// decodeLarge yields the fields named by names whose lengths are the
// numbers of head (separated by spaces) and whose values follow one
// another in rest; it stops at the first malformed length.
func decodeLarge(head, rest string, names []string, yield func(field, value string) bool) {
	for _, f := range names {
		num, more, _ := strings.Cut(head, " ")
		head = more
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > len(rest) {
			return
		}
		if n > 0 && !yield(f, rest[:n]) {
			return
		}
		rest = rest[n:]
	}
}

// decodeStored yields the fields of a call's key (encode in
// redis_scripts.go): "<st> <header> <bf> <in> <rq> <rb>\n", the header
// (a MessagePack map of strings), then the large fields.
func decodeStored(v string, yield func(field, value string) bool) error {
	line, rest, ok := strings.Cut(v, "\n")
	if !ok {
		return ErrDamaged
	}
	st, line, _ := strings.Cut(line, " ")
	num, lens, _ := strings.Cut(line, " ")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > len(rest) {
		return ErrDamaged
	}
	// The state and the header's strings are not left pointing into v: a
	// substring would keep the whole reply alive (request and result
	// included) for as long as a call decoded from it is kept. The state
	// is one of a few constants; the header, small, is copied once.
	if !yield("st", internState(st)) {
		return nil
	}
	more, err := decodeHeader(strings.Clone(rest[:n]), yield)
	if err != nil || !more {
		return err
	}
	decodeLarge(lens, rest[n:], bigFields[:], yield)
	return nil
}

// internState returns the State constant spelled st, or a copy of st
// when it names none.
func internState(st string) string {
	for _, known := range allStates {
		if string(known) == st {
			return string(known)
		}
	}
	return strings.Clone(st)
}

// decodeHeader yields the pairs of a MessagePack map of strings (what
// Lua's cmsgpack.pack makes of a table of strings); more is false if
// yield stopped it.
func decodeHeader(b string, yield func(field, value string) bool) (more bool, err error) {
	if b == "" {
		return false, ErrDamaged
	}
	var n int
	switch c := b[0]; {
	case c&0xf0 == 0x80: // fixmap
		n, b = int(c&0x0f), b[1:]
	case c == 0xde, c == 0xdf: // map 16, map 32
		if n, b, err = mpSized(b[1:], 2<<(c-0xde)); err != nil {
			return false, err
		}
	case c == 0x90: // an empty table packs as an empty array
		return true, nil
	default:
		return false, ErrDamaged
	}
	for range n {
		var f, v string
		if f, b, err = mpString(b); err != nil {
			return false, err
		}
		if v, b, err = mpString(b); err != nil {
			return false, err
		}
		if !yield(f, v) {
			return false, nil
		}
	}
	return true, nil
}

// mpString reads a MessagePack string (or binary) off b.
func mpString(b string) (string, string, error) {
	if b == "" {
		return "", "", ErrDamaged
	}
	n, rest, err := 0, b[1:], error(nil)
	switch c := b[0]; {
	case c&0xe0 == 0xa0: // fixstr
		n = int(c & 0x1f)
	case c >= 0xd9 && c <= 0xdb: // str 8, 16, 32
		n, rest, err = mpSized(rest, 1<<(c-0xd9))
	case c >= 0xc4 && c <= 0xc6: // bin 8, 16, 32
		n, rest, err = mpSized(rest, 1<<(c-0xc4))
	default:
		err = ErrDamaged
	}
	if err != nil || n > len(rest) {
		return "", "", ErrDamaged
	}
	return rest[:n], rest[n:], nil
}

// mpSized reads a big-endian length of width bytes off b.
func mpSized(b string, width int) (int, string, error) {
	if len(b) < width {
		return 0, b, ErrDamaged
	}
	n := 0
	for i := range width {
		n = n<<8 | int(b[i])
	}
	return n, b[width:], nil
}

// storedState reads the state of a call from the start of its key: the
// first word of its first line.
func storedState(prefix string) (State, bool) {
	st, _, ok := strings.Cut(prefix, " ")
	if !ok || st == "" || strings.Contains(st, "\n") {
		return "", false
	}
	return State(st), true
}
