package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

func storedSamples() []storedRequest {
	return []storedRequest{
		{
			Method: "POST", Path: "/tools/write_note", Body: []byte(`{"path":"notes/a.md","content":"x"}`),
			Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1"}, "X-Multi": {"1", "", "3"}},
		},
		{Method: "GET", Path: "/files/a%2Fb", Query: "q=1&r=%00"},
		{Method: "PUT", Path: "/", Header: http.Header{"X-Empty": {}}, Body: []byte{0, 1, 2, 0xff, '{', '"'}},
		{Method: "POST", Path: "/mcp", Body: bytes.Repeat([]byte("é"), 300)},
	}
}

// TestStoredRoundTrip: what encode writes decodes to the same request, and
// equal requests encode to the same bytes whatever the map order.
func TestStoredRoundTrip(t *testing.T) {
	for _, sr := range storedSamples() {
		b := sr.encode()
		if b[0] != storedBinary {
			t.Fatalf("encoding opens with %#x", b[0])
		}
		got, err := decodeStored(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sr) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, sr)
		}
		for range 20 {
			if b2 := sr.encode(); !bytes.Equal(b, b2) {
				t.Fatal("the same request encoded two ways")
			}
		}
	}
}

// TestStoredReadsJSON: calls parked by earlier versions hold the request
// as JSON; they still execute.
func TestStoredReadsJSON(t *testing.T) {
	for _, sr := range storedSamples() {
		old, err := json.Marshal(sr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeStored(old)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sr) {
			t.Errorf("JSON form:\n got %#v\nwant %#v", got, sr)
		}
	}
}

// TestStoredRefusesDamage: every truncation of an encoding and a few
// corruptions are refused or decode to some request, never panic; an
// unknown version or nothing at all is refused.
func TestStoredRefusesDamage(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {2, 0, 0, 0, 0}, {storedBinary, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := decodeStored(b); err == nil {
			t.Errorf("%v decoded", b)
		}
	}
	b := storedSamples()[0].encode()
	for i := 1; i < len(b); i++ {
		_, _ = decodeStored(b[:i]) // must not panic
		c := bytes.Clone(b)
		c[i] ^= 0xff
		_, _ = decodeStored(c)
	}
	// A truncation inside the fields (before the body) is an error.
	if _, err := decodeStored(b[:5]); err == nil {
		t.Error("a request cut inside its path decoded")
	}
}

func FuzzStoredDecode(f *testing.F) {
	for _, sr := range storedSamples() {
		b := sr.encode()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sr, err := decodeStored(b)
		if err != nil || len(b) == 0 || b[0] != storedBinary {
			return
		}
		// What decodes re-encodes to the same bytes, unless it was a
		// header name given twice (a map keeps one).
		again := sr.encode()
		if !bytes.Equal(again, b) && len(again) > len(b) {
			t.Fatalf("decoded %#v re-encodes longer than its source", sr)
		}
	})
}
