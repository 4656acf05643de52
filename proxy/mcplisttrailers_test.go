package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// trailerUpstream answers every request with body typed ct, and after it
// the trailers Content-Digest and ETag of that (unfiltered) body, as an
// upstream that computes its digest while it streams does (RFC 9530
// allows Content-Digest as a trailer).
func trailerUpstream(t *testing.T, ct, body string) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Trailer", "Content-Digest, Etag")
		_, _ = io.WriteString(w, body)
		w.Header().Set("Content-Digest", "sha-256=:unfiltereddigest=:")
		w.Header().Set("Etag", `"sha-of-unfiltered"`)
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := itemsServer(t, upURL)
	return env.url
}

// TestFilteredListTrailers: a filtered answer goes on without the
// upstream's trailers either: an ETag or a digest sent after the body is
// of the unfiltered list too.
func TestFilteredListTrailers(t *testing.T) {
	for _, tc := range []struct {
		name string
		ct   string
		body string
		get  bool
	}{
		{"GET stream (SSE)", "text/event-stream", "id: 1\ndata: " + listWithSecret + "\n\n", true},
		{"POST JSON", "application/json", listWithSecret, false},
		{"POST SSE", "text/event-stream", "id: 1\ndata: " + listWithSecret + "\n\n", false},
	} {
		base := trailerUpstream(t, tc.ct, tc.body)
		res, raw := listBothWays(t, base, tc.get)
		if res.StatusCode != http.StatusOK || strings.Contains(string(raw), "key.pem") {
			t.Fatalf("%s: %d %q, want the list filtered", tc.name, res.StatusCode, raw)
		}
		for _, k := range []string{"Content-Digest", "Etag"} {
			if v := res.Trailer.Get(k); v != "" {
				t.Errorf("%s: filtered body followed by the upstream's %s trailer %q (of the unfiltered body); Trailer header %q",
					tc.name, k, v, res.Header.Values("Trailer"))
			}
		}
	}
}
