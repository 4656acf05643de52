package proxy

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pending"
)

// TestSeal: a call's seal holds under the key that made it and any key
// listed after it, and breaks when any field it covers changes, or under
// another key.
func TestSeal(t *testing.T) {
	k1, k2, k3 := SealKey([]byte("secret one")), SealKey([]byte("secret two")), SealKey([]byte("secret three"))
	call := func() pending.Call {
		return pending.Call{
			ID: "C1", Subject: "agent-42", Principal: "key:agent-42", Upstream: "notes", Tool: "write_note",
			Quorum: []int{2, 1}, Request: []byte("\x01POST /x body"), Info: []byte(`{"arguments":{"path":"a"}}`),
		}
	}
	one, rotated, other := newSealer([][]byte{k1}), newSealer([][]byte{k2, k1}), newSealer([][]byte{k2, k3})
	pc := call()
	pc.RequestDigest = one.seal(&pc)
	if !one.sealed(&pc) || !rotated.sealed(&pc) {
		t.Fatal("a call does not hold its seal under its key")
	}
	if other.sealed(&pc) || newSealer(nil).sealed(&pc) {
		t.Fatal("a call holds its seal under keys that did not make it")
	}
	if upper := strings.ToUpper(pc.RequestDigest); !one.sealed(&pending.Call{
		ID: pc.ID, Subject: pc.Subject, Principal: pc.Principal,
		Upstream: pc.Upstream, Tool: pc.Tool, Quorum: pc.Quorum, Request: pc.Request, Info: pc.Info, RequestDigest: upper,
	}) {
		t.Error("the seal in upper case does not hold") // hex.Decode reads either; the store keeps bytes
	}
	for name, change := range map[string]func(*pending.Call){
		"id":        func(c *pending.Call) { c.ID = "C2" },
		"subject":   func(c *pending.Call) { c.Subject = "agent-43" },
		"principal": func(c *pending.Call) { c.Principal = "key:agent-43" },
		"upstream":  func(c *pending.Call) { c.Upstream = "files" },
		"tool":      func(c *pending.Call) { c.Tool = "delete_file" },
		"quorum":    func(c *pending.Call) { c.Quorum = []int{1, 1} },
		"no quorum": func(c *pending.Call) { c.Quorum = nil },
		"request":   func(c *pending.Call) { c.Request[len(c.Request)-1] = 'Y' },
		"info":      func(c *pending.Call) { c.Info = []byte(`{"arguments":{"path":"b"}}`) },
		// Bytes moved from one field to the next: length prefixes keep
		// them apart.
		"boundary": func(c *pending.Call) { c.Subject, c.Principal = "agent-42k", "ey:agent-42" },
		"digest":   func(c *pending.Call) { c.RequestDigest = "00" + c.RequestDigest[2:] },
		"short":    func(c *pending.Call) { c.RequestDigest = c.RequestDigest[:62] },
		"none":     func(c *pending.Call) { c.RequestDigest = "" },
	} {
		c := call()
		c.RequestDigest = pc.RequestDigest
		change(&c)
		if one.sealed(&c) {
			t.Errorf("%s changed, the seal still holds", name)
		}
	}
}
