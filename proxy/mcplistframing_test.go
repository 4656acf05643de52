package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestListAnswerFraming: a list answer is filtered however an MCP client
// would read it (the go-sdk takes any 2xx, and media types in any case),
// and one toolgate cannot read as JSON or an event stream is refused, not
// handed on. A filtered list is made private to its caller even when the
// upstream wrote no cacheScope (absent reads as "public" from 2026-07-28).
func TestListAnswerFraming(t *testing.T) {
	for _, tc := range []struct {
		name, ct string
		status   int
		refused  bool
	}{
		{"200", "application/json", http.StatusOK, false},
		{"203", "application/json", http.StatusNonAuthoritativeInfo, false},
		{"201", "application/json; charset=utf-8", http.StatusCreated, false},
		{"Application/JSON", "Application/JSON", http.StatusOK, false},
		{"Text/Event-Stream", "Text/Event-Stream", http.StatusOK, false},
		{"text/plain", "text/plain", http.StatusOK, true},
		{"no type", "", http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := listWithSecret
			if strings.HasPrefix(strings.ToLower(tc.ct), "text/event") {
				body = "event: message\ndata: " + listWithSecret + "\n\n"
			}
			res, raw := listThrough(t, tc.status, tc.ct, body, "2026-07-28")
			got := string(raw)
			switch {
			case tc.refused:
				if res.StatusCode != http.StatusBadGateway || strings.Contains(got, "secrets") {
					t.Errorf("an answer toolgate cannot read: %d %s, want 502", res.StatusCode, got)
				}
			case res.StatusCode != tc.status || strings.Contains(got, "secrets") || !strings.Contains(got, "readme"):
				t.Errorf("%d %s answer: %d %s, want it filtered", tc.status, tc.ct, res.StatusCode, got)
			case !strings.Contains(got, `"cacheScope":"private"`):
				t.Errorf("a list filtered for its caller without cacheScope (read as public): %s", got)
			}
		})
	}
}

// TestListAnswerAsArray: a JSON answer that is an array of responses (the
// 2025-03-26 batch form, which the TypeScript SDK's client reads from a
// JSON answer to a single request) is filtered member by member.
func TestListAnswerAsArray(t *testing.T) {
	res, raw := listThrough(t, http.StatusOK, "application/json", "["+listWithSecret+"]", "2025-03-26")
	if res.StatusCode != http.StatusOK || strings.Contains(string(raw), "secrets/key.pem") || !strings.Contains(string(raw), "readme.md") {
		t.Errorf("a list answer sent as a JSON array: %d %s, want it filtered", res.StatusCode, raw)
	}
}

// TestListMediaTypeReadTwoWays: toolgate reads a list answer's media type
// with mime.ParseMediaType, the TypeScript SDK's client with
// contentType.includes("text/event-stream") first. An answer typed
// `application/json; profile="text/event-stream"` whose body is an event
// stream is JSON toolgate cannot read: it is refused (502), not handed on
// to a client that reads the event stream it is.
func TestListMediaTypeReadTwoWays(t *testing.T) {
	body := "event: message\ndata: " + listWithSecret + "\n\n"
	res, raw := listThrough(t, http.StatusOK, `application/json; profile="text/event-stream"`, body, "2025-11-25")
	if res.StatusCode != http.StatusBadGateway || strings.Contains(string(raw), "secrets/key.pem") {
		t.Errorf("an answer typed JSON that holds an event stream: %d %s, want 502", res.StatusCode, raw)
	}
}

// TestListArrayKeepsOtherMembers: a JSON array of messages is written
// back as it came but for what was filtered: a member the filter did not
// touch keeps its bytes (json.Marshal would compact it and escape its "<"
// and "&").
func TestListArrayKeepsOtherMembers(t *testing.T) {
	other := `{"jsonrpc": "2.0", "id": 2, "result": {"note": "a<b & c>d"}}`
	res, raw := listThrough(t, http.StatusOK, "application/json", "["+listWithSecret+","+other+"]", "2025-03-26")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, raw)
	}
	if !strings.Contains(string(raw), other) {
		t.Errorf("a batch member the filter did not touch was rewritten:\nupstream: %s\nclient:   %s", other, raw)
	}
}

// TestListAfterAByteOrderMark: an event stream may begin with a UTF-8 BOM,
// which an SSE reader drops (the TypeScript SDK's client reads the body
// through TextDecoderStream, which strips it): the list answer in the
// event after it is filtered too.
func TestListAfterAByteOrderMark(t *testing.T) {
	body := "\ufeffdata: " + listWithSecret + "\n\n"
	res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
	// Read the answer as a WHATWG SSE client does: drop a leading BOM.
	text := string(bytes.TrimPrefix(raw, []byte("\ufeff")))
	for _, ev := range sseEvents([]byte(text)) {
		if ev.hasData && strings.Contains(ev.data, "secrets/key.pem") {
			t.Errorf("%d: a denied resource reached the client in an event after a BOM: %q", res.StatusCode, ev.data)
		}
	}
}

// TestListAfterALaterByteOrderMark: a line a byte order mark starts, after
// a blank line or after a first mark, is one every reader of the
// upstream's stream ignores; toolgate drops it, so that no rewriting (which
// drops blank lines between events) brings it to the start of its answer,
// where a client that drops a leading mark (TextDecoderStream) would read
// the list in it unfiltered.
func TestListAfterALaterByteOrderMark(t *testing.T) {
	for _, body := range []string{
		"\n\ufeffdata: " + listWithSecret + "\n\n",
		"\ufeff\ufeffdata: " + listWithSecret + "\n\n",
	} {
		res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
		// As a TypeScript client reads it: one leading mark dropped.
		for _, ev := range sseEvents(raw) {
			if strings.Contains(ev.data, "secrets") {
				t.Errorf("%q: %d, a client reads %q", body, res.StatusCode, ev.data)
			}
		}
		if bytes.Contains(raw, []byte("\ufeff")) {
			t.Errorf("%q: a byte order mark is left in the answer: %q", body, raw)
		}
	}
}

// TestListBesideANamedKeepAlive: an SSE list answer that carries, beside
// the result, an event of another name whose data is not JSON ("event:
// ping / data: ping") is filtered and relayed: MCP clients skip events
// not named "message", so only those must be JSON.
func TestListBesideANamedKeepAlive(t *testing.T) {
	body := "event: ping\ndata: ping\n\n" + "event: message\ndata: " + listWithSecret + "\n\n"
	res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
	if res.StatusCode != http.StatusOK || strings.Contains(string(raw), "secrets/key.pem") || !strings.Contains(string(raw), "readme.md") {
		t.Errorf("a list answer beside a named keep-alive event: %d %s, want it filtered and relayed", res.StatusCode, raw)
	}
}

// TestRelayMidStreamByteOrderMark: a byte order mark before an event in
// mid-stream is kept by every SSE reader (the field is "\ufeffdata",
// ignored), so the live relay, which reads the stream event by event, does
// not take that event's data for the answer either.
func TestRelayMidStreamByteOrderMark(t *testing.T) {
	real := `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"REAL"}]}}`
	fake := `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"FAKE"}]}}`
	body := "data: " + real + "\n\n" + "\ufeffdata: " + fake + "\n\n"
	// What a client reading the upstream's stream (and toolgate's stored
	// result) takes as the response: only REAL.
	var datas []string
	for _, ev := range sseEvents([]byte(body)) {
		if ev.hasData {
			datas = append(datas, ev.data)
		}
	}
	if len(datas) != 1 || !strings.Contains(datas[0], "REAL") {
		t.Fatalf("whole-stream reading: %q", datas)
	}
	rl := &liveRelay{m: &rpcResponder{msg: &mcpMessage{id: json.RawMessage("9"), isToolCall: true}}, w: httptest.NewRecorder()}
	if _, _, err := readRelayed(strings.NewReader(body), 1<<20, rl, "c1"); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rl.final, []byte("FAKE")) {
		t.Errorf("the relay took a mid-stream BOM'd event, which no SSE reader reads, as the response: %s", rl.final)
	}
}

// TestSSEFilterByteOrderMarkEdges: sseFilter and sseEvents agree with a WHATWG
// reader on a partial BOM, a lone BOM and two BOMs, and no mark is left
// in what they write: one that a rewriting brought to the start of an
// answer would be dropped by the client, and the line after it read.
func TestSSEFilterByteOrderMarkEdges(t *testing.T) {
	id := func(_ string, d []byte) []byte { return d }
	for _, in := range []string{"\xef\xbbdata: x\n\n", "\ufeff", "\ufeff\ufeffdata: x\n\n", "\xef\n\ndata: y\n\n", "\ufeff:c\n\ndata: z\n\n"} {
		out, err := io.ReadAll(newSSEFilter(io.NopCloser(strings.NewReader(in)), 1<<10, id))
		if err != nil {
			t.Fatal(err)
		}
		whole := rewriteSSEEvents([]byte(in), id)
		var a, b []string
		for _, ev := range sseEventsOf(string(out)) {
			a = append(a, ev.data+"|"+strings.Join(ev.other, ","))
		}
		for _, ev := range sseEventsOf(string(whole)) {
			b = append(b, ev.data+"|"+strings.Join(ev.other, ","))
		}
		if strings.Join(a, ";") != strings.Join(b, ";") || strings.Contains(string(out), "\ufeff") {
			t.Errorf("%q: filter %q, whole %q", in, out, whole)
		}
	}
}

// scriptedListUpstream is a bare MCP server (2025-06-18, no session) that
// answers initialize in JSON, notifications with 202, a GET with 405, and
// resources/list with the SSE body list(id).
func scriptedListUpstream(t *testing.T, list func(id string) string) *url.URL {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage
			Method string
		}
		_ = json.Unmarshal(b, &m)
		switch {
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-06-18",`+
				`"capabilities":{"resources":{}},"serverInfo":{"name":"s","version":"1"}}}`)
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "resources/list":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, list(string(m.ID)))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"no"}}`)
		}
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}

// goSDKList lists resources with the official go-sdk client through a
// toolgate (itemsEngine: secrets/** denied) in front of the scripted upstream.
func goSDKList(t *testing.T, list func(id string) string) ([]string, error) {
	t.Helper()
	upURL := scriptedListUpstream(t, list)
	env := itemsServer(t, upURL)
	tr := &http.Transport{ResponseHeaderTimeout: mcpTimeout}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(mcpCtx(t), &mcp.StreamableClientTransport{
		Endpoint: env.url + "/mcp", HTTPClient: &http.Client{Transport: mcpBearer{tr}}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	rl, err := cs.ListResources(mcpCtx(t), nil)
	if err != nil {
		return nil, err
	}
	var uris []string
	for _, r := range rl.Resources {
		uris = append(uris, r.URI)
	}
	return uris, nil
}

func secretList(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"resources":[` +
		`{"uri":"file:///srv/docs/readme.md","name":"readme"},{"uri":"file:///srv/docs/secrets/key.pem","name":"key"}]}}`
}

// TestGoSDKListFiltered: a resources/list answer from a plain MCP server,
// read by the official go-sdk client, is filtered.
func TestGoSDKListFiltered(t *testing.T) {
	uris, err := goSDKList(t, func(id string) string { return "event: message\ndata: " + secretList(id) + "\n\n" })
	if err != nil || strings.Contains(strings.Join(uris, " "), "key.pem") || len(uris) != 1 {
		t.Fatalf("plain case: %v %v", uris, err)
	}
}

// TestListDataAfterUnicodeSpace: the go-sdk client trims every data line
// with bytes.TrimSpace (\v, \f, U+0085, U+00A0, ...): toolgate reads the
// data as leniently, so a list led by such a space is filtered too.
func TestListDataAfterUnicodeSpace(t *testing.T) {
	for _, sp := range []string{"\v", "\f", "\u00a0", "\u0085"} {
		uris, err := goSDKList(t, func(id string) string { return "event: message\ndata: " + sp + secretList(id) + "\n\n" })
		if err != nil {
			t.Errorf("%q: %v", sp, err)
			continue
		}
		if strings.Contains(strings.Join(uris, " "), "key.pem") {
			t.Errorf("data led by %q: the go-sdk client listed a denied resource: %v", sp, uris)
		}
	}
}

// TestListEventNameSpaces: the go-sdk client reads an event name with
// strings.TrimSpace ("event:  message", "event: message ", "event:\tmessage"
// are all "message"), and the data of such an event that is JSON only
// after its per-line trim ("...,\v" / "...") is a list to it: toolgate
// filters it too.
func TestListEventNameSpaces(t *testing.T) {
	for _, ev := range []string{"event:  message", "event: message ", "event:\tmessage", "event: message\u00a0"} {
		uris, err := goSDKList(t, func(id string) string {
			msg := secretList(id)
			i := strings.Index(msg, `"result"`)
			return ev + "\ndata: " + msg[:i] + "\v\ndata: " + msg[i:] + "\n\n"
		})
		if err != nil {
			t.Errorf("%q: %v", ev, err)
			continue
		}
		if strings.Contains(strings.Join(uris, " "), "key.pem") {
			t.Errorf("%q: the go-sdk client read a message toolgate took for another event, unfiltered: %v", ev, uris)
		}
	}
}
