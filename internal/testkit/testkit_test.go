package testkit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDeps keeps testkit free of toolgate's packages: their own tests
// import it, so any such import would be a cycle.
func TestDeps(t *testing.T) {
	CheckDeps(t, ".", "github.com/toolgate/toolgate/...")
}

func TestUnder(t *testing.T) {
	tests := []struct {
		path, pattern string
		want          bool
	}{
		{"net/http", "net/http", true},
		{"net/http/httptrace", "net/http", false},
		{"net/http/httptrace", "net/http/...", true},
		{"net/http", "net/http/...", true},
		{"net/httpx", "net/http/...", false},
		{"github.com/redis/go-redis/v9", "github.com/redis/go-redis/...", true},
	}
	for _, tt := range tests {
		if got := under(tt.path, tt.pattern); got != tt.want {
			t.Errorf("under(%q, %q) = %v, want %v", tt.path, tt.pattern, got, tt.want)
		}
	}
}

func TestUpstream(t *testing.T) {
	u := NewUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // the recorded body, read again
		w.WriteHeader(200 + n)
		_, _ = w.Write(b)
	})
	for i, body := range []string{"one", "two"} {
		res, err := http.Post(u.URL+"/p?q=1", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200+i || string(got) != body {
			t.Errorf("answer %d = %d %q, want %d %q", i, res.StatusCode, got, 200+i, body)
		}
	}
	reqs := u.Requests()
	if len(reqs) != 2 || reqs[1].Method != http.MethodPost || reqs[1].Path != "/p" || reqs[1].Query != "q=1" || string(reqs[1].Body) != "two" {
		t.Errorf("Requests() = %+v", reqs)
	}
}

// TestUpstreamWithoutSocket serves an Upstream as a plain handler, and
// checks that Reset forgets what was recorded and restarts the count.
func TestUpstreamWithoutSocket(t *testing.T) {
	u := NewUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200 + n) })
	serve := func(path string) int {
		w := httptest.NewRecorder()
		u.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code
	}
	if a, b := serve("/a"), serve("/b"); a != 200 || b != 201 {
		t.Errorf("answers %d %d, want 200 201", a, b)
	}
	if reqs := u.Requests(); len(reqs) != 2 || reqs[0].Path != "/a" || reqs[1].Path != "/b" {
		t.Errorf("Requests() = %+v, want /a and /b", reqs)
	}
	u.Reset()
	if reqs := u.Requests(); len(reqs) != 0 {
		t.Errorf("after Reset, Requests() = %+v, want none", reqs)
	}
	if c := serve("/c"); c != 200 {
		t.Errorf("answer after Reset %d, want 200: the count starts again", c)
	}
	if reqs := u.Requests(); len(reqs) != 1 || reqs[0].Path != "/c" {
		t.Errorf("after Reset and one request, Requests() = %+v, want /c", reqs)
	}
}

// TestFreeAddrsDistinct: the addresses handed out together are never the
// same twice.
func TestFreeAddrsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range FreeAddrs(t, 200) {
		if seen[a] {
			t.Fatalf("address %s handed out twice", a)
		}
		seen[a] = true
	}
}
