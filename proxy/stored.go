package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// storedRequest is a parked call's request exactly as it was evaluated and
// will be forwarded once approved. Its JSON form is what the store keeps and
// what approval tokens bind (through its digest).
type storedRequest struct {
	Method string      `json:"method"`
	Path   string      `json:"path"` // raw path relative to the upstream
	Query  string      `json:"query,omitempty"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

func (c *call) stored(r *http.Request) storedRequest {
	h := r.Header.Clone() // sanitized: no hop-by-hop headers, no claims
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

// encode returns the request's bytes and their digest. encoding/json sorts
// map keys, so equal requests encode equally.
func (sr storedRequest) encode() ([]byte, string) {
	b, _ := json.Marshal(sr) // only strings, bytes and string maps
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

func decodeStored(b []byte) (storedRequest, error) {
	var sr storedRequest
	err := json.Unmarshal(b, &sr)
	return sr, err
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
