package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httputil"
	"sort"
	"strings"
)

// storedRequest is a parked call's request exactly as it was evaluated and
// will be forwarded once approved. Its encoding (encode) is what the store
// keeps, and what the call's seal (seal.go) and so approval tokens bind.
type storedRequest struct {
	Method string      `json:"method"`
	Path   string      `json:"path"` // raw path relative to the upstream
	Query  string      `json:"query,omitempty"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// stored is what r will send once approved. fwdHost is the X-Forwarded-Host
// of an allowed call (Server.fwdHost): an approved call carries the
// same X-Forwarded-* headers, written now, while the agent's connection is
// known.
func (c *call) stored(r *http.Request, fwdHost string) storedRequest {
	h := r.Header.Clone() // sanitized: no hop-by-hop headers, no claims
	setForwarded(&httputil.ProxyRequest{In: r, Out: &http.Request{Header: h}}, fwdHost)
	// The credentials were toolgate's; the body is stored decoded.
	for _, k := range []string{
		"Authorization", "Proxy-Authorization", "Proxy-Authenticate", "Content-Encoding", "Content-Length", "Prefer", "Idempotency-Key",
	} {
		h.Del(k)
	}
	if v := r.Header.Get("Idempotency-Key"); v != "" {
		h.Set("Idempotency-Key", v) // the upstream may deduplicate on it
	}
	return storedRequest{Method: r.Method, Path: c.rawRel, Query: r.URL.RawQuery, Header: h, Body: c.body}
}

// forwardedHeader reports the headers of a stored request that toolgate
// wrote itself (setForwarded); an agent's X-Forwarded-* never get there
// (sanitizeHeaders). Approvers are shown every other header.
func forwardedHeader(k string) bool { return strings.HasPrefix(k, "X-Forwarded-") }

// hiddenHeader reports the headers whose values approvers are not shown:
// those kept out of the policy input (secretHeader), another system's
// credentials. Approvers see that they are sent, and how long they are.
func hiddenHeader(k string) bool { return secretHeader(strings.ToLower(k)) }

// storedBinary opens the binary encoding. Calls parked by earlier
// versions hold JSON, which opens with '{'; decodeStored reads both.
const storedBinary = 1

// encode returns the request's bytes: a version byte,
// then method, path, query, the header (names sorted, so equal requests
// encode equally) and the body, each length-prefixed (uvarint), the body
// raw. Unlike the JSON it replaced, the body is not base64 (a third
// larger in the store) and nothing is reflected on: a parked call is
// encoded once and decoded at every execution and status read.
func (sr storedRequest) encode() []byte {
	n := 1 + 4*binary.MaxVarintLen64 + len(sr.Method) + len(sr.Path) + len(sr.Query) + len(sr.Body)
	names := make([]string, 0, len(sr.Header))
	for k, vs := range sr.Header {
		names = append(names, k)
		n += 2*binary.MaxVarintLen64 + len(k)
		for _, v := range vs {
			n += binary.MaxVarintLen64 + len(v)
		}
	}
	sort.Strings(names)
	b := make([]byte, 0, n)
	b = append(b, storedBinary)
	b = appendField(b, sr.Method)
	b = appendField(b, sr.Path)
	b = appendField(b, sr.Query)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, k := range names {
		b = appendField(b, k)
		b = binary.AppendUvarint(b, uint64(len(sr.Header[k])))
		for _, v := range sr.Header[k] {
			b = appendField(b, v)
		}
	}
	return append(b, sr.Body...)
}

func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errStoredRequest = errors.New("the stored request is malformed")

// decodeStored reads what encode wrote, or the JSON of earlier versions.
func decodeStored(b []byte) (storedRequest, error) {
	var sr storedRequest
	if len(b) > 0 && b[0] == '{' {
		err := json.Unmarshal(b, &sr)
		return sr, err
	}
	if len(b) == 0 || b[0] != storedBinary {
		return sr, errStoredRequest
	}
	d := storedReader{b: b[1:]}
	sr.Method, sr.Path, sr.Query = d.field(), d.field(), d.field()
	if names := d.count(); names > 0 {
		sr.Header = make(http.Header, names)
		for range names {
			k := d.field()
			vs := make([]string, d.count())
			for i := range vs {
				vs[i] = d.field()
			}
			sr.Header[k] = vs
		}
	}
	if d.err != nil {
		return storedRequest{}, d.err
	}
	if len(d.b) > 0 {
		sr.Body = d.b
	}
	return sr, nil
}

// storedReader reads length-prefixed fields; the first error sticks.
type storedReader struct {
	b   []byte
	err error
}

func (d *storedReader) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) { // every element takes a byte at least
		d.err = errStoredRequest
		return 0
	}
	return int(n)
}

func (d *storedReader) field() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errStoredRequest
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *storedReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = errStoredRequest
		return 0
	}
	d.b = d.b[k:]
	return v
}

// digest hashes parts separated by NUL, so no two part lists collide.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalArgs is the arguments re-encoded with sorted keys and exact
// number literals: two calls with the same arguments, however spaced or
// ordered, have the same canonical form.
func canonicalArgs(args map[string]any) string {
	b, _ := json.Marshal(args) // json.Number keeps its literal; maps sort their keys
	return string(b)
}
