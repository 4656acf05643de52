package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// conditionalUpstream is an MCP upstream whose GET stream is a finite
// replay of a list answer (as TestStreamListLength's), served the way
// static or cached content is: with an ETag of the (unfiltered) body,
// honouring If-None-Match (304) and a single Range (206), as
// http.ServeContent does.
func conditionalUpstream(t *testing.T) (base, body, etag string) {
	t.Helper()
	body = "id: 1\ndata: " + listWithSecret + "\n\n"
	etag = `"sha-of-unfiltered"`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Etag", etag)
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(body))
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := itemsServer(t, upURL)
	return env.url, body, etag
}

// streamWith is toolgate's answer at base to a GET of the server's stream
// sent with header (name, value pairs).
func streamWith(t *testing.T, base string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, raw
}

// TestListConditionalNotForwarded: a list request's If-None-Match does
// not reach the upstream: its 304 (not a 2xx, so not filtered) would go
// on with the ETag of the unfiltered list, or answer "yes" to a guessed
// one.
func TestListConditionalNotForwarded(t *testing.T) {
	base, _, etag := conditionalUpstream(t)
	res, _ := streamWith(t, base, "If-None-Match", "*")
	if got := res.Header.Get("Etag"); got != "" {
		t.Errorf("GET stream with If-None-Match: *: %d with the upstream's ETag %q of the unfiltered list", res.StatusCode, got)
	}
	res, _ = streamWith(t, base, "If-None-Match", etag)
	if res.StatusCode == http.StatusNotModified {
		t.Errorf("GET stream with If-None-Match: (a guessed ETag of the unfiltered list): %d, the guess confirmed", res.StatusCode)
	}
}

// TestListRangeNotForwarded: a list request's Range does not reach the
// upstream: a range that starts inside the list's data line would make
// its first, partial, line a field toolgate keeps as sent (sseEvent.other),
// and the hidden entry would reach the caller's bytes unfiltered.
func TestListRangeNotForwarded(t *testing.T) {
	base, body, _ := conditionalUpstream(t)
	from := strings.Index(body, `{"uri":"file:///srv/docs/secrets`)
	res, raw := streamWith(t, base, "Range", "bytes="+strconv.Itoa(from)+"-")
	if res.StatusCode == http.StatusPartialContent && res.Header.Get("Content-Range") == "" {
		t.Errorf("206 sent without Content-Range (RFC 9110 15.3.7: a single-part 206 must carry one)")
	}
	if strings.Contains(string(raw), "key.pem") {
		t.Errorf("GET stream with Range: the hidden entry reached the caller: %q", raw)
	}
}
