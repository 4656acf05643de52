package proxy

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/strictjson"
)

// FuzzQuery sends query strings to a tool call on an upstream that takes
// none, to one on an upstream that does (tool_query), and to a plain HTTP
// call, and checks what a 200 means: the upstream got exactly the query the
// policy saw, which a Go upstream reads as the same names and values; no
// name is repeated, not even in a spelling a stack binds to the same name,
// and no raw '#' cuts it short; an upstream that takes no tool query got
// none; and a query name is never also a body argument.
func FuzzQuery(f *testing.F) {
	fp := newFuzzRecording(f)
	up, err := url.Parse("http://upstream.test")
	if err != nil {
		f.Fatal(err)
	}
	auth, err := identity.New(identity.Config{Anonymous: true})
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{
		Upstreams: []Upstream{
			{Name: "strict", URL: up, Prefix: "/", Transport: fuzzWire{fp.upstream}},
			{Name: "loose", URL: up, Prefix: "/q/", ToolQuery: true, Transport: fuzzWire{fp.upstream}},
		},
		Decider: fp.decider, Auth: auth, MaxBodyBytes: fuzzMaxBody,
	})
	if err != nil {
		f.Fatal(err)
	}
	fp.handler = s.Handler()
	for _, seed := range []struct {
		route uint8
		query string
		body  string
	}{
		{0, "", `{"path":"a"}`},
		{0, "path=.env", `{"path":"README.md"}`},
		{1, "dry=1", `{"path":"a"}`},
		{1, "path=.env", `{"path":"a"}`},
		{1, "a=1&a=2", `{}`},
		{1, "a=1;b=2", `{}`},
		{2, "all=1", ``},
		{2, "all=1&all=0", ``},
		{2, "a=%zz", ``},
		{1, "a+b=c%20d&e", `{"x":1}`},
		{2, "=1&=2", ``},
		{1, "Path=.env", `{"path":"a"}`},
		{1, "p%61th=x", `{"path":"a"}`},
		{2, "a=1&A=2", ``},
		{2, "x=#&dry=1", ``},
		{2, "dry_run=1&dry.run=0", ``},
		{2, "f%5Ba%5D=1&f%5Bb%5D=2", ``},
	} {
		f.Add(seed.route, seed.query, seed.body)
	}
	f.Fuzz(func(t *testing.T, route uint8, query, body string) {
		path, method := []string{"/tools/t", "/q/tools/t", "/files"}[route%3], http.MethodPost
		if route%3 == 2 {
			method = http.MethodGet
			body = ""
		}
		target := path + "?" + query
		if strings.IndexFunc(query, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
			return // not in a request line: a server refuses it before toolgate
		}
		if u, err := url.ParseRequestURI(target); err != nil || u.RawQuery != query {
			return // not a request target a client can send
		}
		req := httptest.NewRequest(method, target, bytes.NewReader([]byte(body)))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		in, got, ok := fp.serve(t, req)
		if !ok {
			return
		}
		if got.Query != query {
			t.Fatalf("the upstream got query %q, the request had %q", got.Query, query)
		}
		if route%3 == 0 && query != "" {
			t.Fatalf("a tool call with query %q reached an upstream that takes none", query)
		}
		goReads, err := url.ParseQuery(got.Query)
		if err != nil {
			t.Fatalf("forwarded a query a Go upstream cannot parse: %q", got.Query)
		}
		if len(goReads) == 0 && len(in.HTTP.Query) == 0 {
			return
		}
		if !reflect.DeepEqual(map[string][]string(goReads), map[string][]string(in.HTTP.Query)) {
			t.Fatalf("query %q: the policy saw %v, a Go upstream reads %v", query, in.HTTP.Query, goReads)
		}
		for name, vs := range goReads {
			if len(vs) > 1 {
				t.Fatalf("query %q names %q %d times", query, name, len(vs))
			}
		}
		if strings.Contains(got.Query, "#") {
			t.Fatalf("forwarded a raw '#', which most stacks read as a fragment: %q", got.Query)
		}
		if a, b := bindsAsOne(goReads); a != "" {
			t.Fatalf("query %q names %q and %q, which a stack may bind as one", query, a, b)
		}
		if in.Tool != nil {
			args, err := strictjson.DecodeObject([]byte(body))
			if err != nil {
				t.Fatalf("a tool call with an unreadable body reached the upstream: %q", body)
			}
			for name := range goReads {
				for arg := range args {
					if strings.EqualFold(name, arg) {
						t.Fatalf("%q is in the query and %q in the body of a forwarded tool call", name, arg)
					}
				}
			}
		}
	})
}

// TestToolNameGrammar holds toolName to its regular expression, on names
// made of the grammar's bytes and a few others, of every length around
// the limit.
func TestToolNameGrammar(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)
	alphabet := []byte("aZ09_.:-/ \x00é")
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 50000 {
		b := make([]byte, rng.IntN(131))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if n%3 == 0 { // mostly valid names, so both answers are common
			for i := range b {
				b[i] = "aZ09_.:-"[rng.IntN(8)]
			}
		}
		if got, want := toolName.MatchString(string(b)), re.Match(b); got != want {
			t.Fatalf("toolName(%q) = %v, the regexp says %v", b, got, want)
		}
	}
}
