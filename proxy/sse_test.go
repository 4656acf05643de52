package proxy

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pending"
)

func TestSSEEvents(t *testing.T) {
	body := ": keep-alive\r\nevent: message\r\nid: 7\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata:  \"id\":1,\r\ndata:\"result\":{}}\r\n\r\n" +
		"data: second\n\n" + "retry: 100\n\n"
	evs := sseEvents([]byte(body))
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(evs), evs)
	}
	if got, want := evs[0].data, "{\"jsonrpc\":\"2.0\",\n \"id\":1,\n\"result\":{}}"; got != want {
		t.Errorf("data over three lines = %q, want %q", got, want)
	}
	if got := strings.Join(evs[0].other, "|"); got != ": keep-alive|event: message|id: 7" {
		t.Errorf("other lines = %q", got)
	}
	if evs[1].data != "second" || evs[2].hasData || evs[2].other[0] != "retry: 100" {
		t.Errorf("events 2 and 3: %+v", evs[1:])
	}
}

// TestWithRPCIDSplitData: a JSON-RPC response whose data field the
// upstream split over several lines still gets the caller's id.
func TestWithRPCIDSplitData(t *testing.T) {
	body := "event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":99,\"result\":{\"content\":[]}}\n\n"
	res := withRPCID(pending.Result{
		Header: map[string][]string{"Content-Type": {"text/event-stream"}}, Body: []byte(body),
	}, json.RawMessage(`"req-1"`))
	evs := sseEvents(res.Body)
	if len(evs) != 1 {
		t.Fatalf("%d events: %q", len(evs), res.Body)
	}
	var msg map[string]any
	if err := json.Unmarshal([]byte(evs[0].data), &msg); err != nil || msg["id"] != "req-1" {
		t.Fatalf("rewritten event %q (%v): id %v, want req-1", evs[0].data, err, msg["id"])
	}
	if evs[0].other[0] != "event: message" {
		t.Errorf("the event line was lost: %q", res.Body)
	}
}

// TestSSEFilter: a stream filtered event by event, read as it arrives in
// pieces, is what rewriteSSE makes of it whole; a line longer than the
// reader's buffer is read whole; an event past the limit ends the stream.
func TestSSEFilter(t *testing.T) {
	long := strings.Repeat("x", 10000)
	stream := "id: 1\ndata: {\"a\":1}\n\n: comment\n\ndata: {\"b\":\"" + long + "\"}\n\r\ndata: last"
	upper := func(b []byte) []byte { return []byte(strings.ToUpper(string(b))) }
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < len(stream); i += 7 {
			_, _ = pw.Write([]byte(stream[i:min(i+7, len(stream))]))
		}
		pw.Close()
	}()
	got, err := io.ReadAll(newSSEFilter(pr, 1<<20, func(_ string, b []byte) []byte { return upper(b) }))
	if err != nil {
		t.Fatal(err)
	}
	if want := rewriteSSE([]byte(stream), upper); string(got) != string(want) {
		t.Errorf("filtered stream\n%q\nwant\n%q", got, want)
	}
	_, err = io.ReadAll(newSSEFilter(io.NopCloser(strings.NewReader(stream)), 5000, func(_ string, b []byte) []byte { return upper(b) }))
	if err != errSSEEventTooLarge {
		t.Errorf("an event past the limit: %v, want errSSEEventTooLarge", err)
	}
	// Lines ended by "\r" alone: each event goes on when its empty line
	// comes, not when a "\n" does.
	pr, pw = io.Pipe()
	fl := newSSEFilter(pr, 1<<20, func(_ string, b []byte) []byte { return upper(b) })
	go func() { _, _ = pw.Write([]byte("data: one\r\r")) }()
	buf := make([]byte, 64)
	if n, err := fl.Read(buf); err != nil || string(buf[:n]) != "data: ONE\n\n" {
		t.Errorf("a CR-ended event: %q, %v", buf[:n], err)
	}
	// A keep-alive comment outside an event goes on at once.
	go func() { _, _ = pw.Write([]byte(":keepalive\n")) }()
	if n, err := fl.Read(buf); err != nil || string(buf[:n]) != ":keepalive\n" {
		t.Errorf("a keep-alive: %q, %v", buf[:n], err)
	}
	pw.Close()
}

// TestSSEByteOrderMark: a stream's leading byte order mark is dropped, as
// an SSE reader drops it, so the first line reads as the field it is,
// read whole or event by event, the mark arriving in pieces; a line a
// later mark starts, which readers ignore, is dropped; bytes that only
// start like a mark are kept. Each event's name is given to the filter.
func TestSSEByteOrderMark(t *testing.T) {
	var names []string
	upper := func(name string, b []byte) []byte {
		names = append(names, name)
		return []byte(strings.ToUpper(string(b)))
	}
	for _, tc := range []struct{ in, want string }{
		{"\ufeffdata: a\n\n", "data: A\n\n"},
		{"\ufeffevent: ping\ndata: b\n\n\ufeffdata: c\n\n", "event: ping\ndata: B\n\n"},
		{"\xef\xbbdata: d\n\n", "\xef\xbbdata: d\n\n"},
	} {
		if got := string(rewriteSSEEvents([]byte(tc.in), upper)); got != tc.want {
			t.Errorf("whole %q: %q, want %q", tc.in, got, tc.want)
		}
		pr, pw := io.Pipe()
		go func() {
			for i := range len(tc.in) {
				_, _ = pw.Write([]byte{tc.in[i]})
			}
			pw.Close()
		}()
		got, err := io.ReadAll(newSSEFilter(pr, 1<<20, upper))
		if err != nil || string(got) != tc.want {
			t.Errorf("event by event %q: %q, %v, want %q", tc.in, got, err, tc.want)
		}
	}
	if want := []string{"", "", "ping", "ping"}; !slices.Equal(names, want) {
		t.Errorf("event names %q, want %q", names, want)
	}
}
