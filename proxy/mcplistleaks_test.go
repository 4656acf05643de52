package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func leakEnv(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := itemsServer(t, upURL)
	return env.url
}

// listDo sends a list request (GET stream or POST resources/list) and
// records the headers of any 1xx answer.
func listDo(t *testing.T, base string, get bool, extra ...string) (*http.Response, []byte, []textproto.MIMEHeader) {
	t.Helper()
	var req *http.Request
	if get {
		req, _ = http.NewRequest(http.MethodGet, base+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req, _ = http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	var mu sync.Mutex
	var infos []textproto.MIMEHeader
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			mu.Lock()
			infos = append(infos, h)
			mu.Unlock()
			return nil
		},
	}))
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, raw, infos
}

// TestListEarlyHintsNotPassed: an upstream's 1xx answer (103 Early Hints)
// before a list is not passed on: the reverse proxy writes it before
// ModifyResponse sees anything, and its headers could be the unfiltered
// list's validators or digests.
func TestListEarlyHintsNotPassed(t *testing.T) {
	for _, get := range []bool{true, false} {
		base := leakEnv(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Etag", `"sha-of-unfiltered"`)
			w.Header().Set("Content-Digest", "sha-256=:unfiltereddigest=:")
			w.Header().Set("Last-Modified", "Mon, 07 Dec 2026 06:00:00 GMT")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: 1\ndata: "+listWithSecret+"\n\n")
		})
		res, raw, infos := listDo(t, base, get)
		if res.StatusCode != 200 || strings.Contains(string(raw), "key.pem") {
			t.Fatalf("get=%v: %d %q", get, res.StatusCode, raw)
		}
		for _, h := range infos {
			for _, k := range []string{"Etag", "Content-Digest", "Last-Modified"} {
				if v := h.Get(k); v != "" {
					t.Errorf("get=%v: 1xx before the filtered list carried the upstream's %s %q (of the unfiltered list)", get, k, v)
				}
			}
		}
	}
}

// TestListTrailersEitherWay: trailers the upstream announced and ones it
// did not (http.TrailerPrefix) are not passed on, on all three list paths.
func TestListTrailersEitherWay(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body string
		get            bool
	}{
		{"GET SSE", "text/event-stream", "id: 1\ndata: " + listWithSecret + "\n\n", true},
		{"POST JSON", "application/json", listWithSecret, false},
		{"POST SSE", "text/event-stream", "id: 1\ndata: " + listWithSecret + "\n\n", false},
	} {
		for _, announce := range []bool{false, true} {
			base := leakEnv(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.ct)
				if announce {
					w.Header().Set("Trailer", "Etag")
				}
				_, _ = io.WriteString(w, tc.body)
				w.(http.Flusher).Flush()
				if announce {
					w.Header().Set("Etag", `"sha-of-unfiltered"`)
				}
				w.Header().Set(http.TrailerPrefix+"Content-Digest", "sha-256=:unfiltereddigest=:")
				w.Header().Set(http.TrailerPrefix+"X-Count", "2")
			})
			res, raw, _ := listDo(t, base, tc.get)
			if res.StatusCode != 200 || strings.Contains(string(raw), "key.pem") {
				t.Fatalf("%s: %d %q", tc.name, res.StatusCode, raw)
			}
			if len(res.Trailer) > 0 {
				t.Errorf("%s announce=%v: trailers reached the caller: %v", tc.name, announce, res.Trailer)
			}
		}
	}
}

// TestStreamWithTrailersStillStreams: a GET stream with announced
// trailers still streams: the first event arrives before the upstream
// ends.
func TestStreamWithTrailersStillStreams(t *testing.T) {
	release := make(chan struct{})
	base := leakEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Trailer", "Etag")
		_, _ = io.WriteString(w, "id: 1\ndata: "+listWithSecret+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		w.Header().Set("Etag", `"x"`)
	})
	defer close(release)
	res := getStream(t, base)
	got := make(chan string, 1)
	go func() {
		br := bufio.NewReader(res.Body)
		var sb strings.Builder
		for {
			l, err := br.ReadString('\n')
			sb.WriteString(l)
			if err != nil || (l == "\n" && sb.Len() > 1) {
				break
			}
		}
		got <- sb.String()
	}()
	select {
	case s := <-got:
		if strings.Contains(s, "key.pem") || !strings.Contains(s, "readme") {
			t.Errorf("first event %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("first event not streamed before the upstream ended (Transfer-Encoding %v)", res.TransferEncoding)
	}
}

// TestListPartialHeadersStripped: the conditional and range headers do
// not reach the upstream on either list path; a tools/call (not a list)
// still forwards them (the upstream's shared proxy is not changed).
func TestListPartialHeadersStripped(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	base := leakEnv(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, listWithSecret)
	})
	hdrs := []string{"Range", "bytes=10-", "If-Range", `"x"`, "If-None-Match", `"x"`, "If-Modified-Since", "Mon, 07 Dec 2026 06:00:00 GMT", "If-Match", "*", "If-Unmodified-Since", "Mon, 07 Dec 2026 06:00:00 GMT"}
	for _, get := range []bool{false, true} {
		listDo(t, base, get, hdrs...)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	for i, h := range seen {
		for j := 0; j < len(hdrs); j += 2 {
			if v := h.Values(hdrs[j]); len(v) > 0 {
				t.Errorf("request %d: %s %q reached the upstream", i, hdrs[j], v)
			}
		}
	}
}
