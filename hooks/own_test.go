package hooks

import (
	"compress/gzip"
	"crypto/tls"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOwnClientHeaders: with the Runner's own client a hook receives the
// headers the package documents and no other: no Accept-Encoding of
// net/http's own, on plain HTTP or https.
func TestOwnClientHeaders(t *testing.T) {
	want := []string{"Content-Length", "Content-Type", "User-Agent", "Webhook-Id", "Webhook-Timestamp"}
	for _, https := range []bool{false, true} {
		// The recording hook server, also behind TLS for the https case.
		hook := newHookServer(t, `{"decision":"allow"}`)
		srv := hook.Server
		if https {
			srv = httptest.NewTLSServer(hook)
			t.Cleanup(srv.Close)
		}
		r := newRunner(t, Options{Hooks: []Hook{{Name: "h", URL: srv.URL + "/hook"}}})
		if https {
			trustServer(r, srv)
		}
		if v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput)); v.Decision != Allow {
			t.Fatalf("https=%v: decision %q (%+v), want allow", https, v.Decision, v.Reasons)
		}
		var got [][]string
		for _, req := range hook.Requests() {
			got = append(got, slices.Sorted(maps.Keys(req.Header)))
		}
		if diff := cmp.Diff([][]string{want}, got); diff != "" {
			t.Errorf("https=%v: headers sent (-want +got):\n%s", https, diff)
		}
	}
}

// trustServer makes r's own https transport trust srv's certificate, as a
// deployment trusts its hooks'.
func trustServer(r *Runner, srv *httptest.Server) {
	r.own.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
}

// TestCompressedAnswerFails: toolgate asks for no compression, so an
// answer compressed unasked (a gateway in front of the hook) is not read
// as JSON: the hook fails, and its on_failure answer (deny) decides.
func TestCompressedAnswerFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		_, _ = io.WriteString(gz, `{"decision":"allow"}`)
		_ = gz.Close()
	}))
	t.Cleanup(srv.Close)
	r := newRunner(t, Options{Hooks: []Hook{{Name: "h", URL: srv.URL + "/hook"}}})
	v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
	if v.Decision != Deny || len(v.Reasons) != 1 || !v.Reasons[0].Failed {
		t.Errorf("decision %q (%+v), want the failed hook's deny", v.Decision, v.Reasons)
	}
}
