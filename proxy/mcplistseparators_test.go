package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// pythonSSE reads an event stream as the MCP Python SDK's client does
// with httpx-sse before 0.4.2: lines split as Python's str.splitlines
// splits them (elsewhereBreaks besides CR, LF and CRLF), then the
// specification's fields. It returns the data of the events it reads as
// messages (named "message", the default).
func pythonSSE(raw string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRuneInString(raw[i:])
		switch {
		case r == '\r' && strings.HasPrefix(raw[i:], "\r\n"):
			lines, start, i = append(lines, raw[start:i]), i+2, i+2
		case r == '\n' || r == '\r' || strings.ContainsRune(elsewhereBreaks, r):
			lines, start, i = append(lines, raw[start:i]), i+n, i+n
		default:
			i += n
		}
	}
	lines = append(lines, raw[start:])
	var out []string
	event, data, has := "message", []string{}, false
	for _, l := range lines {
		if l == "" {
			if has && event == "message" {
				out = append(out, strings.Join(data, "\n"))
			}
			event, data, has = "message", []string{}, false
			continue
		}
		if strings.HasPrefix(l, ":") {
			continue
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			data, has = append(data, value), true
		}
	}
	return out
}

// pythonListed is every resource URI a Python client reads listed in
// raw, an event stream.
func pythonListed(raw string) []string {
	var uris []string
	for _, d := range pythonSSE(raw) {
		var m struct {
			Result struct {
				Resources []struct{ URI string }
			}
		}
		if json.Unmarshal([]byte(d), &m) == nil {
			for _, r := range m.Result.Resources {
				uris = append(uris, r.URI)
			}
		}
	}
	return uris
}

// TestListLinesOtherReadersSplit: a list answer's lines are written so
// that a reader ending lines at U+2028 and its kin (elsewhereBreaks) reads
// no list toolgate did not filter: a line holding one that toolgate reads
// as a field or a comment is dropped. (In a message's JSON such a
// character can only stand in a string, where a line split off holds no
// unescaped quote, so no JSON-RPC message; toolgate escapes it anyway,
// TestListKeepsSeparatorsInStrings.)
func TestListLinesOtherReadersSplit(t *testing.T) {
	for _, sep := range []string{"\u2028", "\u2029", "\u0085", "\v", "\f", "\x1e"} {
		for name, body := range map[string]string{
			"in an event's name": "event: message" + sep + "data: " + listWithSecret + "\n\n" + "data: " + listWithSecret + "\n\n",
			"in a comment":       ": keep-alive" + sep + "data: " + listWithSecret + sep + sep + "\n\n" + "data: " + listWithSecret + "\n\n",
			"in an id":           "id: 1" + sep + sep + "data: " + listWithSecret + sep + sep + "\ndata: " + listWithSecret + "\n\n",
		} {
			res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
			got := pythonListed(string(raw))
			if res.StatusCode != http.StatusOK || slices.Contains(got, "file:///srv/docs/secrets/key.pem") || !slices.Contains(got, "file:///srv/docs/readme.md") {
				t.Errorf("%q %s: %d, a Python client reads listed %v in %q; want readme.md alone", sep, name, res.StatusCode, got, raw)
			}
		}
	}
}

// TestListKeepsSeparatorsInStrings: an honest list whose entry's name
// holds U+2028 (JSON allows it raw; JavaScript's JSON.stringify writes it
// so) is relayed with the same name, escaped, which every reader reads
// whole.
func TestListKeepsSeparatorsInStrings(t *testing.T) {
	body := "data: " + strings.Replace(listWithSecret, `"name":"readme"`, "\"name\":\"read\u2028me\u0085\"", 1) + "\n\n"
	res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
	datas := pythonSSE(string(raw))
	if res.StatusCode != http.StatusOK || len(datas) != 1 {
		t.Fatalf("%d %q: want one message", res.StatusCode, raw)
	}
	var m struct {
		Result struct{ Resources []struct{ URI, Name string } }
	}
	if err := json.Unmarshal([]byte(datas[0]), &m); err != nil || len(m.Result.Resources) != 1 || m.Result.Resources[0].Name != "read\u2028me\u0085" {
		t.Errorf("a Python client reads %q (%v), want readme.md named %q", datas[0], err, "read\u2028me\u0085")
	}
}

// TestStreamCommentOtherReadersSplit: on the server's GET stream, a
// comment outside an event is relayed at once, unless a reader could
// split it into lines (elsewhereBreaks): then it is dropped, since it
// could hold a list's data line.
func TestStreamCommentOtherReadersSplit(t *testing.T) {
	events := []string{": ping\u2028data: " + secretList("7") + "\u2028\u2028" + "\n" + "data: " + secretList("8") + "\n\n"}
	upURL, _ := gatedStream(t, events)
	env := itemsServer(t, upURL)
	var raw strings.Builder
	br := bufio.NewReader(getStream(t, env.url).Body)
	for !strings.Contains(raw.String(), `"id":8`) {
		line, err := br.ReadString('\n')
		raw.WriteString(line)
		if err != nil {
			t.Fatalf("stream ended: %v after %q", err, raw.String())
		}
	}
	if got := pythonListed(raw.String() + "\n"); slices.Contains(got, "file:///srv/docs/secrets/key.pem") {
		t.Errorf("a Python client reads listed %v on the GET stream: %q", got, raw.String())
	}
}

// TestListCharsetRefused: a list answer whose type names a charset other
// than UTF-8 is 502, on a POST and on the GET stream. toolgate reads the
// bytes as UTF-8; the Python SDK's client (httpx) decodes an event stream
// with the named charset first, and there the same bytes hold other lines:
// in ISO-8859-1 the C3 85 of "Å" is "Ã" and U+0085, a line end, and in
// UTF-16 a whole list reads where toolgate saw no data line.
func TestListCharsetRefused(t *testing.T) {
	body := ": Å" + "data: " + listWithSecret + "\n\n" + "data: " + listWithSecret + "\n\n"
	for ct, want := range map[string]int{
		"text/event-stream; charset=iso-8859-1": http.StatusBadGateway,
		"text/event-stream; charset=utf-16le":   http.StatusBadGateway,
		"application/json; charset=latin1":      http.StatusBadGateway,
		"text/event-stream; charset=UTF-8":      http.StatusOK,
		"text/event-stream;charset=utf8":        http.StatusOK,
		"text/event-stream":                     http.StatusOK,
	} {
		b := body
		if strings.HasPrefix(ct, "application/json") {
			b = listWithSecret
		}
		res, raw := listThrough(t, http.StatusOK, ct, b, "2025-06-18")
		if got := pythonListed(string(raw)); res.StatusCode != want ||
			want == http.StatusOK && (slices.Contains(got, "file:///srv/docs/secrets/key.pem") || !slices.Contains(got, "file:///srv/docs/readme.md")) {
			t.Errorf("%q: %d %q, want %d (and the list filtered)", ct, res.StatusCode, raw, want)
		}
	}
	upURL := rawMCPUpstream(t, http.StatusOK, "text/event-stream; charset=iso-8859-1", body)
	env := itemsServer(t, upURL)
	res := streamAnswer(t, env.url)
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadGateway {
		t.Errorf("GET stream in ISO-8859-1: %d %q, want 502", res.StatusCode, raw)
	}
}

// TestListAnswerHeadersReadOnce: the headers that say how a list answer
// is decoded are read as every client reads them, and the rewritten
// answer says only what toolgate read: two Content-Type lines (httpx joins
// them, and finds the second's charset) or two Content-Encoding lines
// (httpx decodes each, net/http sees the first) are 502; a charset*= that
// Go's parser drops unread (Python's email package reads it) leaves the
// answer typed with its bare media type, as every filtered answer is.
func TestListAnswerHeadersReadOnce(t *testing.T) {
	body := ": Å" + "data: " + listWithSecret + "\n\n" + "data: " + listWithSecret + "\n\n"
	for _, tc := range []struct {
		name     string
		header   http.Header
		want     int
		wantType string
	}{
		{"two types", http.Header{"Content-Type": {"text/event-stream", "text/event-stream; charset=iso-8859-1"}}, http.StatusBadGateway, ""},
		{"two encodings", http.Header{"Content-Type": {"text/event-stream"}, "Content-Encoding": {"identity", "gzip"}}, http.StatusBadGateway, ""},
		{"charset*=", http.Header{"Content-Type": {"text/event-stream; charset*=iso-8859-1"}}, http.StatusOK, "text/event-stream"},
		{"quoted utf-8", http.Header{"Content-Type": {`Text/Event-Stream; charset="utf-8"`}, "Content-Encoding": {"identity"}}, http.StatusOK, "text/event-stream"},
		{"JSON", http.Header{"Content-Type": {"application/json; charset=utf-8"}}, http.StatusOK, "application/json"},
	} {
		b := body
		if strings.HasPrefix(tc.header.Get("Content-Type"), "application/json") {
			b = listWithSecret
		}
		base := headersUpstream(t, tc.header, b)
		for _, get := range []bool{false, true} {
			res, raw := listBothWays(t, base, get)
			got := res.Header.Values("Content-Type")
			text := string(raw)
			if tc.wantType == "application/json" {
				text = "data: " + text + "\n\n"
			}
			listed := pythonListed(text)
			if res.StatusCode != tc.want || tc.want == http.StatusOK && (!slices.Equal(got, []string{tc.wantType}) || res.Header.Get("Content-Encoding") != "" ||
				slices.Contains(listed, "file:///srv/docs/secrets/key.pem") || !slices.Contains(listed, "file:///srv/docs/readme.md")) {
				t.Errorf("%s (GET %v): %d, Content-Type %q, Content-Encoding %q, %q; want %d typed %q, filtered",
					tc.name, get, res.StatusCode, got, res.Header.Values("Content-Encoding"), raw, tc.want, tc.wantType)
			}
		}
	}
}
