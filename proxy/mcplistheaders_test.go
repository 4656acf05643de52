package proxy

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestStreamListLength: an upstream may answer the GET stream with a
// finite event stream (a replay), which net/http sends with a
// Content-Length; toolgate rewrites its events (sseFilter), shorter or
// longer, so the answer goes on without the upstream's length, whole.
func TestStreamListLength(t *testing.T) {
	for name, body := range map[string]string{
		"shorter (an entry hidden)": "id: 1\ndata: " + listWithSecret + "\n\n",
		"longer (a ping padded)":    "id: 1\ndata:" + strings.Replace(listWithSecret, `,{"uri":"file:///srv/docs/secrets/key.pem","name":"key"}`, "", 1) + "\n\n",
	} {
		upURL := rawMCPUpstream(t, http.StatusOK, "text/event-stream", body)
		env := itemsServer(t, upURL)
		res := streamAnswer(t, env.url)
		raw, err := io.ReadAll(res.Body)
		declared := res.Header.Get("Content-Length")
		if err != nil || (declared != "" && declared != strconv.Itoa(len(raw))) || !strings.Contains(string(raw), "readme.md") {
			t.Errorf("%s: %d, Content-Length %q, got %d bytes %q, read error %v; want the filtered stream whole, its length as declared",
				name, res.StatusCode, declared, len(raw), raw, err)
		}
	}
}

// TestFilteredListHeaders: a list answer toolgate filters per caller goes
// on without the upstream's headers that describe the body as the upstream
// wrote it (an ETag, a digest of the unfiltered list, with which a caller
// could check a guess at the entries it was not shown), and marked for no
// cache to store (Cache-Control: public would let a shared cache hand one
// caller's list to another).
func TestFilteredListHeaders(t *testing.T) {
	base := headersUpstream(t, http.Header{
		"Content-Type":   {"application/json"},
		"Cache-Control":  {"public, max-age=600"},
		"Etag":           {`"sha-of-unfiltered"`},
		"Content-Digest": {"sha-256=:unfiltereddigest=:"},
		"Last-Modified":  {"Mon, 07 Dec 2026 06:00:00 GMT"},
	}, listWithSecret)
	for _, get := range []bool{false, true} {
		res, raw := listBothWays(t, base, get)
		if res.StatusCode != http.StatusOK || strings.Contains(string(raw), "key.pem") {
			t.Fatalf("GET %v: %d %q, want the list filtered", get, res.StatusCode, raw)
		}
		if cc := res.Header.Values("Cache-Control"); len(cc) != 1 || cc[0] != "no-store" {
			t.Errorf("GET %v: filtered per caller, sent Cache-Control %q, want no-store", get, cc)
		}
		for _, h := range []string{"ETag", "Content-Digest", "Last-Modified"} {
			if v := res.Header.Get(h); v != "" {
				t.Errorf("GET %v: filtered body sent with the upstream's %s %q (of the unfiltered body)", get, h, v)
			}
		}
	}
}

// headersUpstream is an MCP upstream answering every request with body
// under header, and a toolgate deciding with itemsEngine in front of it.
func headersUpstream(t *testing.T, header http.Header, body string) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		maps.Copy(w.Header(), header)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := itemsServer(t, upURL)
	return env.url
}

// listBothWays is toolgate's answer at base to a resources/list POST
// (get false) and to a GET of the server's stream (get true).
func listBothWays(t *testing.T, base string, get bool) (*http.Response, []byte) {
	t.Helper()
	if get {
		res := streamAnswer(t, base)
		raw, _ := io.ReadAll(res.Body)
		return res, raw
	}
	res, _, raw := postMCP(t, &mcpEnv{url: base}, `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`,
		"Authorization", "Bearer agent-key", "Mcp-Protocol-Version", "2025-06-18")
	return res, raw
}
