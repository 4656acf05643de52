package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// smallBody is a typical tool call: about 200 bytes, a few keys, one nested
// object, one escape.
const smallBody = `{"path":"/srv/reports/2026/q3/summary.csv","mode":"read","encoding":"utf-8","max_bytes":65536,` +
	`"follow_symlinks":false,"options":{"columns":["date","region","revenue"],"limit":100,"label":"caf\u00e9"}}`

// largeBody is a bulk call of about 64 KiB: an array of small records with
// nested objects, numbers, escapes and non-ASCII text.
var largeBody = func() []byte {
	var b bytes.Buffer
	b.WriteString(`{"table":"events","dry_run":false,"rows":[`)
	for i := 0; b.Len() < 64<<10-400; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"user":"user-%04d","event":"page_view","ts":"2026-03-%02dT12:%02d:00Z",`+
			`"score":%d.%02d,"tags":["web","eu-west-1"],"meta":{"ua":"Mozilla/5.0 (X11; Linux x86_64)",`+
			`"path":"\/docs\/page-%d","title":"Über \"uns\" – Seite %d","ref":null}}`,
			i, i%997, 1+i%28, i%60, i%100, i%97, i, i)
	}
	b.WriteString(`],"comment":"bulk import\nsecond line \u00e9\ud83d\ude00"}`)
	return b.Bytes()
}()

var benchBodies = []struct {
	name string
	data []byte
}{
	{"small", []byte(smallBody)},
	{"large", largeBody},
}

// TestBenchBodies keeps the benchmark inputs honest: the sizes they claim,
// accepted, and read the same by encoding/json.
func TestBenchBodies(t *testing.T) {
	sizes := map[string][2]int{"small": {150, 250}, "large": {60 << 10, 64 << 10}}
	for _, bb := range benchBodies {
		t.Run(bb.name, func(t *testing.T) {
			if n, r := len(bb.data), sizes[bb.name]; n < r[0] || n > r[1] {
				t.Errorf("%s body is %d bytes, want %d..%d", bb.name, n, r[0], r[1])
			}
			got, err := DecodeObject(bb.data)
			if err != nil {
				t.Fatal(err)
			}
			std, err := stdDecode(bb.data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffJSON(std, any(got)); diff != "" {
				t.Errorf("mismatch (-std +strictjson):\n%s", diff)
			}
		})
	}
}

func BenchmarkDecodeObject(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.data)))
			for b.Loop() {
				if _, err := DecodeObject(bb.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodingJSON decodes the same bodies to the same values with
// encoding/json (Decoder with UseNumber), for comparison. It checks nothing
// that DecodeObject refuses.
func BenchmarkEncodingJSON(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.data)))
			for b.Loop() {
				dec := json.NewDecoder(bytes.NewReader(bb.data))
				dec.UseNumber()
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
