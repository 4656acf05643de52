package notes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"unicode/utf8"
)

// MaxBodyBytes is the largest request body the REST front reads.
const MaxBodyBytes = 1 << 20

// NewHandler returns the REST front of files:
//
//	POST /tools/read_file   {"path"}            → 200 {"path","content"}
//	POST /tools/write_note  {"path","content"}  → 200 {"path","bytes"}
//	POST /tools/delete_file {"path"}            → 200 {"path","deleted":true}
//	GET  /files                                 → 200 {"files":[...]}
//	GET  /healthz                               → 200 ok
//
// The "path" in an answer is the cleaned path ([CleanPath]). Errors are JSON
// {"error": "..."}: 400 for a body that is not one JSON object of string
// arguments (unknown, missing, duplicate or non-string arguments, invalid
// UTF-8) or for an invalid path, 404 for an unknown file, tool or route, 405
// for a wrong method, 413 for a body over [MaxBodyBytes].
func NewHandler(files *Files) http.Handler {
	h := &handler{files: files}
	mux := http.NewServeMux()
	// The method-less patterns catch what the method patterns do not, so
	// that a wrong method gets a JSON 405 rather than ServeMux's plain text.
	mux.HandleFunc("POST /tools/{tool}", h.tool)
	mux.HandleFunc("/tools/{tool}", methodNotAllowed(http.MethodPost))
	mux.HandleFunc("GET /files", h.list)
	mux.HandleFunc("/files", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("/healthz", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &statusError{http.StatusNotFound, "no route for " + r.URL.Path})
	})
	return mux
}

type handler struct {
	files *Files
}

type readResult struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type writeResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

type deleteResult struct {
	Path    string `json:"path"`
	Deleted bool   `json:"deleted"`
}

func (h *handler) tool(w http.ResponseWriter, r *http.Request) {
	res, err := h.call(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// call runs the tool named in the path and returns its JSON result.
func (h *handler) call(w http.ResponseWriter, r *http.Request) (any, error) {
	switch name := r.PathValue("tool"); name {
	case "read_file":
		args, err := readArgs(w, r, "path")
		if err != nil {
			return nil, err
		}
		p, err := CleanPath(args["path"])
		if err != nil {
			return nil, err
		}
		content, err := h.files.Read(p)
		if err != nil {
			return nil, err
		}
		return readResult{Path: p, Content: content}, nil
	case "write_note":
		args, err := readArgs(w, r, "path", "content")
		if err != nil {
			return nil, err
		}
		p, err := CleanPath(args["path"])
		if err != nil {
			return nil, err
		}
		if err := h.files.Write(p, args["content"]); err != nil {
			return nil, err
		}
		return writeResult{Path: p, Bytes: len(args["content"])}, nil
	case "delete_file":
		args, err := readArgs(w, r, "path")
		if err != nil {
			return nil, err
		}
		p, err := CleanPath(args["path"])
		if err != nil {
			return nil, err
		}
		if err := h.files.Delete(p); err != nil {
			return nil, err
		}
		return deleteResult{Path: p, Deleted: true}, nil
	default:
		return nil, &statusError{http.StatusNotFound, fmt.Sprintf("unknown tool %q", name)}
	}
}

func (h *handler) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Files []string `json:"files"`
	}{h.files.List()})
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok")
}

// readArgs reads a body that must be one JSON object whose members are
// exactly the string arguments named in want, and returns them by name.
//
// Keys match exactly. encoding/json would match struct fields
// case-insensitively, so {"file":"README.md","Path":".env"} would read .env
// while toolgate's policy, which looks for the key "path" and then "file",
// judged README.md: the server must read arguments the way the policy did.
// For the same reason duplicate keys and invalid UTF-8 (which encoding/json
// silently replaces) are refused rather than resolved.
func readArgs(w http.ResponseWriter, r *http.Request, want ...string) (map[string]string, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &statusError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes)}
		}
		return nil, &statusError{http.StatusBadRequest, "reading request body: " + err.Error()}
	}
	if !utf8.Valid(body) {
		return nil, badRequest("request body is not valid UTF-8")
	}
	raw, err := objectMembers(body)
	if err != nil {
		return nil, err
	}
	args := make(map[string]string, len(want))
	for _, k := range want {
		v, ok := raw[k]
		if !ok {
			return nil, badRequest("missing argument %q", k)
		}
		// A JSON null would unmarshal into a string without error.
		if len(v) == 0 || v[0] != '"' {
			return nil, badRequest("argument %q must be a string", k)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, badRequest("argument %q: %v", k, err)
		}
		args[k] = s
		delete(raw, k)
	}
	if len(raw) > 0 {
		// The first in order, so that the answer does not vary by map order.
		return nil, badRequest("unknown argument %q", slices.Sorted(maps.Keys(raw))[0])
	}
	return args, nil
}

// objectMembers splits a JSON object into its members without decoding
// their values, refusing duplicate keys and anything after the object.
func objectMembers(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, badRequest("request body must be a JSON object")
	}
	members := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, badRequest("invalid JSON: %v", err)
		}
		key := tok.(string) // inside an object, Token returns keys as strings
		if _, dup := members[key]; dup {
			return nil, badRequest("duplicate key %q", key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, badRequest("invalid JSON: %v", err)
		}
		members[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, badRequest("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("unexpected data after the JSON object")
	}
	return members, nil
}
