package notes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		err  error
	}{
		{"plain", "README.md", "README.md", nil},
		{"nested", "chapters/01.md", "chapters/01.md", nil},
		{"leading dot slash", "./README.md", "README.md", nil},
		{"leading slash", "/README.md", "README.md", nil},
		{"several leading slashes", "//notes/today.txt", "notes/today.txt", nil},
		{"backslashes", `notes\today.txt`, "notes/today.txt", nil},
		{"dot dot inside", "chapters/../.env", ".env", nil},
		{"dot segments and doubled slashes", "notes/./a//b/", "notes/a/b", nil},
		{"rooted dot dot stays at the root", "/../README.md", "README.md", nil},
		{"dot dot", "..", "", ErrInvalidPath},
		{"climbs out", "../x", "", ErrInvalidPath},
		{"climbs out after a segment", "a/../../x", "", ErrInvalidPath},
		{"climbs out with backslashes", `..\x`, "", ErrInvalidPath},
		{"empty", "", "", ErrInvalidPath},
		{"dot", ".", "", ErrInvalidPath},
		{"root", "/", "", ErrInvalidPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CleanPath(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("CleanPath(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			if got != tt.want {
				t.Errorf("CleanPath(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	f := NewFiles()

	want := []string{".env", "README.md", "chapters/01.md", "notes/today.txt"}
	if diff := cmp.Diff(want, f.List()); diff != "" {
		t.Errorf("List() of the seed (-want +got):\n%s", diff)
	}
	if got, err := f.Read("notes/today.txt"); err != nil || got != "draft" {
		t.Errorf(`Read("notes/today.txt") = %q, %v, want "draft", nil`, got, err)
	}
	if got, err := f.Read("/README.md"); err != nil || !strings.HasPrefix(got, "# The Book\n") {
		t.Errorf(`Read("/README.md") = %q, %v, want the README`, got, err)
	}

	if err := f.Write(`notes\new.md`, "hello"); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got, err := f.Read("notes/new.md"); err != nil || got != "hello" {
		t.Errorf(`Read after Write = %q, %v, want "hello", nil`, got, err)
	}
	if err := f.Write("notes/new.md", "again"); err != nil {
		t.Fatalf("Write over an existing file: %v", err)
	}
	if got, _ := f.Read("notes/new.md"); got != "again" {
		t.Errorf(`Read after a second Write = %q, want "again"`, got)
	}
	if err := f.Delete("./notes/new.md"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := f.Read("notes/new.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read after Delete: error = %v, want ErrNotFound", err)
	}

	if err := f.Delete("notes/new.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete of a missing file: error = %v, want ErrNotFound", err)
	}
	if _, err := f.Read("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read of a missing file: error = %v, want ErrNotFound", err)
	}
	if err := f.Write("../escape", "x"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Write outside the root: error = %v, want ErrInvalidPath", err)
	}
	if _, err := f.Read("../.env"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Read outside the root: error = %v, want ErrInvalidPath", err)
	}
	if err := f.Delete(""); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Delete of an empty path: error = %v, want ErrInvalidPath", err)
	}
	if diff := cmp.Diff(want, f.List()); diff != "" {
		t.Errorf("List() at the end (-want +got):\n%s", diff)
	}
}

// newServer starts the REST front over a fresh seeded file set.
func newServer(t *testing.T) (*httptest.Server, *Files) {
	t.Helper()
	f := NewFiles()
	srv := httptest.NewServer(NewHandler(f))
	t.Cleanup(srv.Close)
	return srv, f
}

// do sends one request and returns the status, the headers and the body.
func do(t *testing.T, srv *httptest.Server, method, path, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, b
}

// decodeJSON decodes an answer that must be JSON.
func decodeJSON(t *testing.T, h http.Header, b []byte) map[string]any {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, b)
	}
	return got
}

func TestHandler(t *testing.T) {
	type obj = map[string]any
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		want       obj    // the whole answer, for successes
		wantErr    string // a substring of "error", for failures
	}{
		{
			"read_file reads", "POST", "/tools/read_file", `{"path":"notes/today.txt"}`,
			200,
			obj{"path": "notes/today.txt", "content": "draft"},
			"",
		},
		{
			"read_file answers the cleaned path", "POST", "/tools/read_file", `{"path":"./notes\\today.txt"}`,
			200,
			obj{"path": "notes/today.txt", "content": "draft"},
			"",
		},
		{
			"read_file of a missing file is 404", "POST", "/tools/read_file", `{"path":"chapters/99.md"}`,
			404, nil, "file not found: chapters/99.md",
		},
		{
			"read_file outside the root is 400", "POST", "/tools/read_file", `{"path":"../etc/passwd"}`,
			400, nil, "climbs out of the root",
		},
		{
			"read_file without a path is 400", "POST", "/tools/read_file", `{}`,
			400, nil, `missing argument "path"`,
		},
		{
			"read_file with an empty path is 400", "POST", "/tools/read_file", `{"path":""}`,
			400, nil, "names no file",
		},
		{
			"read_file with a null path is 400", "POST", "/tools/read_file", `{"path":null}`,
			400, nil, `argument "path" must be a string`,
		},
		{
			"read_file with a number path is 400", "POST", "/tools/read_file", `{"path":1}`,
			400, nil, `argument "path" must be a string`,
		},
		{
			"keys match case-sensitively", "POST", "/tools/read_file", `{"Path":".env"}`,
			400, nil, `missing argument "path"`,
		},
		{
			"an unknown argument is 400", "POST", "/tools/read_file", `{"path":"README.md","file":".env"}`,
			400, nil, `unknown argument "file"`,
		},
		{
			"a duplicate key is 400", "POST", "/tools/read_file", `{"path":"README.md","path":".env"}`,
			400, nil, `duplicate key "path"`,
		},
		{
			"invalid JSON is 400", "POST", "/tools/read_file", `{"path":`,
			400, nil, "invalid JSON",
		},
		{
			"an empty body is 400", "POST", "/tools/read_file", ``,
			400, nil, "must be a JSON object",
		},
		{
			"an array is 400", "POST", "/tools/read_file", `["README.md"]`,
			400, nil, "must be a JSON object",
		},
		{
			"data after the object is 400", "POST", "/tools/read_file", `{"path":"README.md"} {}`,
			400, nil, "after the JSON object",
		},
		{
			"invalid UTF-8 is 400", "POST", "/tools/read_file", "{\"path\":\"notes/\xff\"}",
			400, nil, "not valid UTF-8",
		},
		{
			"write_note writes", "POST", "/tools/write_note", `{"path":"notes/new.md","content":"héllo"}`,
			200,
			obj{"path": "notes/new.md", "bytes": float64(len("héllo"))},
			"",
		},
		{
			"write_note replaces", "POST", "/tools/write_note", `{"path":"/notes/today.txt","content":""}`,
			200,
			obj{"path": "notes/today.txt", "bytes": float64(0)},
			"",
		},
		{
			"write_note without content is 400", "POST", "/tools/write_note", `{"path":"notes/x"}`,
			400, nil, `missing argument "content"`,
		},
		{
			"write_note outside the root is 400", "POST", "/tools/write_note", `{"path":"a/../../x","content":"x"}`,
			400, nil, "climbs out of the root",
		},
		{
			"delete_file deletes", "POST", "/tools/delete_file", `{"path":".env"}`,
			200,
			obj{"path": ".env", "deleted": true},
			"",
		},
		{
			"delete_file of a missing file is 404", "POST", "/tools/delete_file", `{"path":"nope"}`,
			404, nil, "file not found: nope",
		},
		{
			"an unknown tool is 404", "POST", "/tools/shell_exec", `{"command":"id"}`,
			404, nil, `unknown tool "shell_exec"`,
		},
		{
			"a nested tool path is 404", "POST", "/tools/read_file/x", `{"path":"README.md"}`,
			404, nil, "no route",
		},
		{
			"an unknown route is 404", "GET", "/nope", ``,
			404, nil, "no route for /nope",
		},
		{
			"GET of a tool is 405", "GET", "/tools/read_file", ``,
			405, nil, "GET is not allowed",
		},
		{
			"PUT of a tool is 405", "PUT", "/tools/write_note", `{"path":"notes/x","content":"x"}`,
			405, nil, "PUT is not allowed",
		},
		{
			"files lists", "GET", "/files", ``,
			200,
			obj{"files": []any{".env", "README.md", "chapters/01.md", "notes/today.txt"}},
			"",
		},
		{
			"POST of files is 405", "POST", "/files", `{}`,
			405, nil, "POST is not allowed",
		},
		{
			"POST of healthz is 405", "POST", "/healthz", ``,
			405, nil, "POST is not allowed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newServer(t)
			status, h, b := do(t, srv, tt.method, tt.path, tt.body)
			if status != tt.wantStatus {
				t.Errorf("%s %s %s: status = %d, want %d; body %s", tt.method, tt.path, tt.body, status, tt.wantStatus, b)
			}
			got := decodeJSON(t, h, b)
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s %s %s: answer (-want +got):\n%s", tt.method, tt.path, tt.body, diff)
				}
				return
			}
			msg, _ := got["error"].(string)
			if len(got) != 1 || !strings.Contains(msg, tt.wantErr) {
				t.Errorf("%s %s %s: answer = %s, want only an error containing %q", tt.method, tt.path, tt.body, b, tt.wantErr)
			}
			if status == http.StatusMethodNotAllowed && h.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
		})
	}
}

func TestHandler_healthz(t *testing.T) {
	srv, _ := newServer(t)
	for _, method := range []string{"GET", "HEAD"} {
		status, _, b := do(t, srv, method, "/healthz", "")
		want := "ok"
		if method == "HEAD" {
			want = ""
		}
		if status != http.StatusOK || string(b) != want {
			t.Errorf("%s /healthz = %d %q, want 200 %q", method, status, b, want)
		}
	}
}

// TestHandler_roundTrip checks that the tools act on one shared file set.
func TestHandler_roundTrip(t *testing.T) {
	srv, f := newServer(t)
	steps := []struct {
		path, body string
		wantStatus int
	}{
		{"/tools/write_note", `{"path":"notes/plan.md","content":"1. write"}`, 200},
		{"/tools/read_file", `{"path":"notes/plan.md"}`, 200},
		{"/tools/delete_file", `{"path":"notes/plan.md"}`, 200},
		{"/tools/read_file", `{"path":"notes/plan.md"}`, 404},
		{"/tools/delete_file", `{"path":"notes/plan.md"}`, 404},
	}
	for i, s := range steps {
		if status, _, b := do(t, srv, "POST", s.path, s.body); status != s.wantStatus {
			t.Fatalf("step %d: POST %s %s = %d %s, want %d", i, s.path, s.body, status, b, s.wantStatus)
		}
	}
	if err := f.Write("notes/direct.md", "via Files"); err != nil {
		t.Fatal(err)
	}
	_, h, b := do(t, srv, "POST", "/tools/read_file", `{"path":"notes/direct.md"}`)
	if diff := cmp.Diff(map[string]any{"path": "notes/direct.md", "content": "via Files"}, decodeJSON(t, h, b)); diff != "" {
		t.Errorf("read of a file written through Files (-want +got):\n%s", diff)
	}
}

func TestHandler_bodyLimit(t *testing.T) {
	srv, _ := newServer(t)
	envelope := `{"path":"notes/big","content":""}`
	fits := `{"path":"notes/big","content":"` + strings.Repeat("x", MaxBodyBytes-len(envelope)) + `"}`

	status, _, b := do(t, srv, "POST", "/tools/write_note", fits)
	if status != http.StatusOK {
		t.Fatalf("body of exactly %d bytes: status = %d %s, want 200", len(fits), status, b)
	}
	status, h, b := do(t, srv, "POST", "/tools/write_note", fits+" ")
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("body of %d bytes: status = %d, want 413", len(fits)+1, status)
	}
	decodeJSON(t, h, b)
}

// TestFiles_concurrent gives the race detector writers, readers, deleters and
// listers on one file set, directly and through the REST front.
func TestFiles_concurrent(t *testing.T) {
	srv, f := newServer(t)
	const workers, writes = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range writes {
				p := fmt.Sprintf("notes/w%d/%d.txt", w, i)
				if err := f.Write(p, p); err != nil {
					t.Errorf("Write(%q): %v", p, err)
				}
				if got, err := f.Read(p); err != nil || got != p {
					t.Errorf("Read(%q) = %q, %v, want its own content", p, got, err)
				}
				_ = f.List()
				_ = f.Delete("notes/today.txt") // all but one fail with ErrNotFound
			}
		})
		wg.Go(func() {
			for i := range writes / 5 {
				p := fmt.Sprintf("notes/http%d/%d.txt", w, i)
				// Not do: t.Fatal must not be called outside the test's goroutine.
				body := fmt.Sprintf(`{"path":%q,"content":%q}`, p, p)
				res, err := srv.Client().Post(srv.URL+"/tools/write_note", "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("write_note %s: %v", p, err)
					continue
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("write_note %s = %d, want 200", p, res.StatusCode)
				}
			}
		})
	}
	wg.Wait()

	// The seed minus the deleted note, plus every write.
	if got, want := len(f.List()), 3+workers*writes+workers*(writes/5); got != want {
		t.Errorf("len(List()) = %d, want %d", got, want)
	}
	for w := range workers {
		p := fmt.Sprintf("notes/http%d/%d.txt", w, writes/5-1)
		if got, err := f.Read(p); err != nil || got != p {
			t.Errorf("Read(%q) = %q, %v, want its own content", p, got, err)
		}
	}
}
