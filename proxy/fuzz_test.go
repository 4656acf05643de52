package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/policy"
)

// fuzzToolName is the tool name grammar (docs/http-api.md, REST tool calls), written out again here
// so the fuzzer does not trust the proxy's own copy.
var fuzzToolName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)

// fuzzBase is the path of the second upstream's URL: calls under /n/ go to
// the recording upstream at /base/….
const fuzzBase = "/base"

// fuzzMaxBody is the fuzzed proxy's limits.max_body_bytes.
const fuzzMaxBody = 8 << 10

// fuzzProxy is one toolgate in front of one recording upstream, reused by
// every fuzz iteration: its decider allows everything and remembers what
// it decided on.
type fuzzProxy struct {
	handler  http.Handler
	upstream *testkit.Upstream

	mu      sync.Mutex
	inputs  []*policy.Input
	decider Decider
}

// newFuzzRecording is a fuzzProxy without its toolgate yet: the recording
// upstream, and the decider that allows everything and remembers it.
func newFuzzRecording(f *testing.F) *fuzzProxy {
	f.Helper()
	fp := &fuzzProxy{upstream: newRecorder(f)}
	fp.decider = deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		fp.inputs = append(fp.inputs, in)
		return policy.Decision{Action: policy.Allow}, nil
	})
	return fp
}

func newFuzzProxy(f *testing.F) *fuzzProxy {
	f.Helper()
	fp := newFuzzRecording(f)
	files, err := url.Parse("http://upstream.test")
	if err != nil {
		f.Fatal(err)
	}
	notes, err := url.Parse("http://upstream.test" + fuzzBase)
	if err != nil {
		f.Fatal(err)
	}
	auth, err := identity.New(identity.Config{Anonymous: true})
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{
		Upstreams: []Upstream{
			{Name: "files", URL: files, Prefix: "/", Transport: fuzzWire{fp.upstream}},
			{Name: "notes", URL: notes, Prefix: "/n/", Transport: fuzzWire{fp.upstream}},
		},
		Decider: fp.decider,
		Auth:    auth,
		// Small, so the limit is in the fuzzer's reach and the inputs it
		// finds interesting stay cheap to minimise.
		MaxBodyBytes: fuzzMaxBody,
	})
	if err != nil {
		f.Fatal(err)
	}
	fp.handler = s.Handler()
	return fp
}

// fuzzWire is an upstream transport without sockets: it writes each request
// as HTTP/1.1 bytes, parses them back as the upstream's server would, and
// serves them with h. No goroutines or connection pools, so each iteration's
// coverage is its own and the fuzzer does not chase flaky inputs.
type fuzzWire struct{ h http.Handler }

func (fw fuzzWire) RoundTrip(r *http.Request) (*http.Response, error) {
	var wire bytes.Buffer
	if err := r.Write(&wire); err != nil { // closes r.Body
		return nil, err
	}
	in, err := http.ReadRequest(bufio.NewReader(&wire))
	if err != nil {
		return nil, err
	}
	w := httptest.NewRecorder()
	fw.h.ServeHTTP(w, in)
	res := w.Result()
	res.Request = r
	return res, nil
}

// reset forgets the previous iteration.
func (fp *fuzzProxy) reset() {
	fp.mu.Lock()
	fp.inputs = nil
	fp.mu.Unlock()
	fp.upstream.Reset()
}

func (fp *fuzzProxy) decided() []*policy.Input {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return append([]*policy.Input(nil), fp.inputs...)
}

// fuzzTargetOK reports whether httptest.NewRequest accepts target (it
// panics otherwise): the same request line parsed the same way.
func fuzzTargetOK(target string) bool {
	if target == "" || strings.ContainsAny(target, " \r\n") {
		return false
	}
	_, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST " + target + " HTTP/1.0\r\n\r\n")))
	return err == nil
}

// fuzzHeaderValues splits a fuzzed header into values, one per line ("" is
// no header at all), and reports false when a value holds a byte no HTTP
// server would deliver in a field value.
func fuzzHeaderValues(s string) ([]string, bool) {
	if s == "" {
		return nil, true
	}
	vals := strings.Split(s, "\n")
	for _, v := range vals {
		for i := 0; i < len(v); i++ {
			if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
				return nil, false
			}
		}
	}
	return vals, true
}

// fuzzDecoded is body as toolgate must forward it once accepted: gunzipped
// when the request declared gzip, as is otherwise.
func fuzzDecoded(encodings []string, body []byte) ([]byte, error) {
	for _, v := range encodings {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c == "gzip" || c == "x-gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					return nil, err
				}
				return io.ReadAll(zr)
			}
		}
	}
	return body, nil
}

func fuzzGzip(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.Bytes()
}

// FuzzToolCall drives the whole proxy handler with fuzzed paths, Content-Type
// and Content-Encoding headers (several values: one per line) and bodies,
// and checks what reaches the upstream against what the policy saw
// (SECURITY.md INV-1, INV-2, INV-4; docs/http-api.md, refused before the policy runs).
func FuzzToolCall(f *testing.F) {
	const ct = "application/json"
	gz := fuzzGzip
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
	seeds := []struct {
		path, contentType, contentEncoding string
		body                               []byte
	}{
		// Real calls.
		{"/tools/read_file", ct, "", []byte(`{"path":"notes/a.txt"}`)},
		{"/tools/fs.write?dry=1", ct + "; charset=utf-8", "", []byte(`{"path":"./notes//today.txt","content":"h\u00e9llo","n":12345678901234567890}`)},
		{"/tools/mcp:search-v2", ct, "identity", []byte(`{"query":"x","limit":10,"filters":{"tags":["a","b"],"deep":{"ok":true,"none":null}}}`)},
		{"/n/tools/read_file", ct, "", []byte(`{"path":"a"}`)},
		{"/n", ct, "", []byte(`{}`)},
		{"/files?all=1", "", "", nil},
		{"/files/a%20b", "text/plain", "", []byte("plain")},
		{"/tools/t", ct, "gzip", gz(`{"a":1}`)},
		{"/tools/t", ct, "x-gzip", gz(`{"path":"notes/a.txt"}`)},
		{"/tools/t", ct, "gzip, identity", gz(`{}`)},
		{"/tools/" + strings.Repeat("a", 128), ct, "", []byte(`{}`)},
		// Class A: routing and path normalisation.
		{"/tools/a%2Fb", ct, "", []byte(`{}`)},
		{"/tools/a%2fb", ct, "", []byte(`{}`)},
		{"/tools/..", ct, "", []byte(`{}`)},
		{"/tools/%2e%2e", ct, "", []byte(`{}`)},
		{"/tools/.x", ct, "", []byte(`{}`)},
		{"/x/../tools/t", ct, "", []byte(`{}`)},
		{"/tools/./t", ct, "", []byte(`{}`)},
		{"/tools//t", ct, "", []byte(`{}`)},
		{"//tools/t", ct, "", []byte(`{}`)},
		{"/tools/", ct, "", []byte(`{}`)},
		{"/tools", ct, "", []byte(`{}`)},
		{"/tools/t/", ct, "", []byte(`{}`)},
		{"/tools/a/b", ct, "", []byte(`{}`)},
		{"/tools/t;x=1", ct, "", []byte(`{}`)},
		{"/tools;x=1/t", ct, "", []byte(`{}`)},
		{"/tools/t%3bx", ct, "", []byte(`{}`)},
		{"/tools\\t", ct, "", []byte(`{}`)},
		{"/tools/t%5c", ct, "", []byte(`{}`)},
		{"/tools/t%00", ct, "", []byte(`{}`)},
		{"/tools/read%5Ffile", ct, "", []byte(`{}`)},
		{"/tools/r\u0435ad", ct, "", []byte(`{}`)},
		{"/tools/t?a=1;b=2", ct, "", []byte(`{}`)},
		{"/tools/t?a=%zz", ct, "", []byte(`{}`)},
		{"/tools/t#frag", ct, "", []byte(`{}`)},
		{"/tools/" + strings.Repeat("a", 129), ct, "", []byte(`{}`)},
		{"/n/tools/../../tools/t", ct, "", []byte(`{}`)},
		{"/n%2Ftools/t", ct, "", []byte(`{}`)},
		{"/N/tools/t", ct, "", []byte(`{}`)},
		{"/TOOLS/t", ct, "", []byte(`{}`)},
		{"http://evil.example/tools/t", ct, "", []byte(`{}`)},
		// Class B: JSON parser differentials.
		{"/tools/t", ct, "", []byte(`{"path":"a","path":"b"}`)},
		{"/tools/t", ct, "", []byte(`{"path":"a","p\u0061th":"b"}`)},
		{"/tools/t", ct, "", []byte(`{"o":{"k":1,"k":2}}`)},
		{"/tools/t", ct, "", []byte(`{"path":"a","Path":"b"}`)},
		{"/tools/t", ct, "", []byte(`{"k":1,"\u212a":2}`)},
		{"/tools/t", ct, "", []byte("{\"path\":\"\xff\"}")},
		{"/tools/t", ct, "", []byte("{\"path\":\"\xc0\xaf\"}")},
		{"/tools/t", ct, "", []byte("{\"\xed\xa0\x80\":1}")},
		{"/tools/t", ct, "", []byte(`{"path":"\ud800"}`)},
		{"/tools/t", ct, "", []byte(`{"path":"\udc00\ud800"}`)},
		{"/tools/t", ct, "", []byte(`{"path":"a\u0000b","emoji":"\ud83d\ude00"}`)},
		{"/tools/t", ct, "", []byte("\xef\xbb\xbf{}")},
		{"/tools/t", ct, "", []byte(`{}{}`)},
		{"/tools/t", ct, "", []byte(`{} x`)},
		{"/tools/t", ct, "", []byte(`[1]`)},
		{"/tools/t", ct, "", []byte(`"x"`)},
		{"/tools/t", ct, "", []byte(``)},
		{"/tools/t", ct, "", []byte(`{"a":1,}`)},
		{"/tools/t", ct, "", []byte(`{"a":NaN}`)},
		{"/tools/t", ct, "", []byte(`{"a":01}`)},
		{"/tools/t", ct, "", []byte(`{"a":1e400,"b":-0.0e-0,"c":123456789012345678901234567890}`)},
		{"/tools/t", ct, "", []byte(`{/*c*/"a":1}`)},
		{"/tools/t", ct, "", []byte("{\"a\":\"\t\"}")},
		{"/tools/t", ct, "", []byte("{\"a\":1}\f")},
		{"/tools/t", ct, "", []byte(deep(63))},
		{"/tools/t", ct, "", []byte(deep(64))},
		{"/tools/t", ct, "", []byte(deep(65))},
		{"/tools/t", ct, "", []byte(deep(4000))},
		// Class C: body encoding, content type, framing.
		{"/tools/t", "", "", []byte(`{}`)},
		{"/tools/t", "text/plain", "", []byte(`{}`)},
		{"/tools/t", "application/x-www-form-urlencoded", "", []byte(`path=a`)},
		{"/tools/t", ct + "\n" + ct, "", []byte(`{}`)},
		{"/tools/t", ct + ", text/plain", "", []byte(`{}`)},
		{"/tools/t", ct + "; charset=latin1", "", []byte(`{}`)},
		{"/tools/t", ct + ";charset=UTF-8", "", []byte(`{}`)},
		{"/tools/t", "Application/JSON", "", []byte(`{}`)},
		{"/tools/t", "application/json-patch+json", "", []byte(`{}`)},
		{"/tools/t", ct + "; charset=\"utf-8\"; x", "", []byte(`{}`)},
		{"/tools/t", ct, "br", []byte(`{}`)},
		{"/tools/t", ct, "deflate", []byte(`{}`)},
		{"/tools/t", ct, "gzip, gzip", gz(string(gz(`{}`)))},
		{"/tools/t", ct, "gzip\ngzip", gz(string(gz(`{}`)))},
		{"/tools/t", ct, "GZIP", gz(`{}`)},
		{"/tools/t", ct, "gzip", []byte("not gzip")},
		{"/tools/t", ct, "gzip", append(gz(`{"a":1}`), gz(`{"b":2}`)...)},
		{"/tools/t", ct, "gzip", append(gz(`{"a":1}`), "trailing"...)},
		{"/tools/t", ct, "gzip", gz(`{"a":"` + strings.Repeat("0", 1<<20) + `"}`)},
		{"/tools/t", ct, "", []byte(`{"a":"` + strings.Repeat("x", fuzzMaxBody-8) + `"}`)},
		{"/tools/t", ct, "", []byte(`{"a":"` + strings.Repeat("x", fuzzMaxBody-7) + `"}`)},
		{"/tools/t", ct, "gzip", gz(`{"a":"` + strings.Repeat("x", fuzzMaxBody-7) + `"}`)},
		{"/tools/t", ct, "", gz(`{}`)},
		{"/tools/t", ct, "identity", gz(`{}`)},
	}
	for _, s := range seeds {
		f.Add(s.path, s.contentType, s.contentEncoding, s.body)
	}

	fp := newFuzzProxy(f)
	f.Fuzz(func(t *testing.T, path, contentType, contentEncoding string, body []byte) {
		if !fuzzTargetOK(path) {
			return
		}
		cts, ok := fuzzHeaderValues(contentType)
		if !ok {
			return
		}
		encs, ok := fuzzHeaderValues(contentEncoding)
		if !ok {
			return
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		for _, v := range cts {
			req.Header.Add("Content-Type", v)
		}
		for _, v := range encs {
			req.Header.Add("Content-Encoding", v)
		}
		rawQuery := req.URL.RawQuery

		in, up, ok := fp.serve(t, req)
		if !ok {
			return
		}
		base := ""
		if in.Upstream.Name == "notes" {
			base = fuzzBase
		}
		// INV-2: the path, query and body the upstream received are the
		// ones the policy evaluated.
		rel, ok := strings.CutPrefix(up.Path, base)
		if !ok || rel != in.HTTP.Path || up.Method != http.MethodPost {
			t.Fatalf("upstream %s got %s %q; the policy saw path %q (upstream base %q)", in.Upstream.Name, up.Method, up.Path, in.HTTP.Path, base)
		}
		if up.Query != rawQuery {
			t.Fatalf("upstream query %q, request query %q", up.Query, rawQuery)
		}
		want, err := fuzzDecoded(encs, body)
		if err != nil {
			t.Fatalf("toolgate accepted a body it should not have decoded: %v", err)
		}
		if !bytes.Equal(up.Body, want) {
			t.Fatalf("upstream body %q, want the decoded request body %q", up.Body, want)
		}
		// INV-1: whatever the upstream routes as a tool call was decided
		// as one.
		if strings.HasPrefix(rel, "/tools/") && in.Tool == nil {
			t.Fatalf("request %q reached upstream %s as tool call %q, but the policy saw kind %q with no tool", path, in.Upstream.Name, up.Path, in.Kind)
		}
		if in.Tool == nil {
			return
		}
		if in.Kind != policy.KindREST {
			t.Errorf("input kind %q with a tool, want rest", in.Kind)
		}
		if !fuzzToolName.MatchString(in.Tool.Name) {
			t.Fatalf("tool name %q does not match the grammar", in.Tool.Name)
		}
		if rel != "/tools/"+in.Tool.Name {
			t.Fatalf("upstream path %q for tool %q", up.Path, in.Tool.Name)
		}
		dec := json.NewDecoder(bytes.NewReader(up.Body))
		dec.UseNumber()
		var args map[string]any
		if err := dec.Decode(&args); err != nil {
			t.Fatalf("the upstream cannot decode the body the policy accepted: %v", err)
		}
		// reflect.DeepEqual decides: cmp.Diff is exponential in the depth
		// of nested arrays, and bodies nest up to the decoder's limit.
		if !reflect.DeepEqual(in.Tool.Arguments, args) {
			t.Fatalf("arguments the policy saw (-) and the upstream decodes (+) differ:\n%s", cmp.Diff(in.Tool.Arguments, args))
		}
	})
}

// serve sends req through the proxy (whose decider allows everything) and
// checks what every answer must hold: a call ID; a 200 was decided once,
// allowed and forwarded once; a 4xx was refused before any decision and
// reached nothing (INV-4). It returns the decided input and what the
// upstream received, or ok false when the request was refused.
func (fp *fuzzProxy) serve(t *testing.T, req *http.Request) (in *policy.Input, up testkit.Request, ok bool) {
	t.Helper()
	fp.reset()
	// httptest names example.com, a public name: a caller without
	// credentials must name toolgate as an agent does (identity/browser.go).
	req.Host = "toolgate.test"
	w := httptest.NewRecorder()
	fp.handler.ServeHTTP(w, req)
	res := w.Result()
	got, ins := fp.upstream.Requests(), fp.decided()

	callID := res.Header.Get(headerCallID)
	if callID == "" {
		t.Fatalf("status %d without %s", res.StatusCode, headerCallID)
	}
	decision := res.Header.Values(headerDecision)
	switch {
	case res.StatusCode == http.StatusOK:
		// A JSON-RPC batch is decided once more for each member's method.
		if len(got) != 1 || len(ins) < 1 || (len(ins) > 1 && ins[0].MCP == nil) {
			t.Fatalf("200: the upstream received %d requests and the policy decided %d times, want 1 and 1 (more for a batch)", len(got), len(ins))
		}
		if len(decision) != 1 || decision[0] != outcomeAllow {
			t.Fatalf("200 with %s %q, want [allow]", headerDecision, decision)
		}
	case res.StatusCode >= 400 && res.StatusCode < 500:
		// Refused before any decision (the decider allows everything):
		// nothing may reach the upstream (INV-4).
		if len(got) != 0 || len(ins) != 0 {
			t.Fatalf("%d: the upstream received %d requests and the policy decided %d times, want 0 and 0", res.StatusCode, len(got), len(ins))
		}
		if len(decision) != 1 || decision[0] != outcomeInvalid {
			t.Fatalf("%d with %s %q, want [invalid]", res.StatusCode, headerDecision, decision)
		}
		return nil, testkit.Request{}, false
	default:
		// 500 is middleware.Recoverer answering for a panic.
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("unexpected status %d: %s", res.StatusCode, b)
	}

	in, up = ins[0], got[0]
	if in.CallID != callID || up.Header.Get(headerCallID) != callID {
		t.Errorf("call IDs: input %q, upstream %q, answer %q", in.CallID, up.Header.Get(headerCallID), callID)
	}
	return in, up, true
}
