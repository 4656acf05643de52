// Package notes is the example tool server of toolgate's quickstart: three
// tools, read_file, write_note and delete_file, over a small in-memory file
// set that holds a book, a draft note and a secret. The shipped example
// policy (rego/example) guards exactly these tools and files, so the
// quickstart, the tests and docker-compose can show allow, ask and deny on
// something real.
//
// The file set ([Files]) is separate from its REST front ([NewHandler]) so
// that other fronts (MCP) can serve the same files. The package keeps no
// logs and no state beyond the files; it is a demo, not a file server.
package notes

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
)

var (
	// ErrNotFound is returned (wrapped) for a path that names no file.
	ErrNotFound = errors.New("notes: file not found")
	// ErrInvalidPath is returned (wrapped) for a path that is empty or
	// climbs out of the file set's root.
	ErrInvalidPath = errors.New("notes: invalid path")
)

// Files is an in-memory set of text files keyed by cleaned path (see
// [CleanPath]). It is flat, like an object store: a directory is only a
// prefix of names. It is safe for concurrent use; the zero value is not
// usable, call [NewFiles].
type Files struct {
	mu    sync.RWMutex
	files map[string]string
}

// NewFiles returns the file set of the quickstart: a README, a chapter, a
// draft note and a .env file whose secret must never leave.
func NewFiles() *Files {
	return &Files{files: map[string]string{
		"README.md": "# The Book\n\n" +
			"A short book kept by toolgate's example tool server.\n" +
			"The story is in chapters/; drafts go in notes/.\n",
		"chapters/01.md": "# Chapter 1\n\n" +
			"The agent woke up in front of a proxy it had never seen before.\n" +
			"Every tool it reached for was asked a question first.\n",
		"notes/today.txt": "draft",
		".env":            "SECRET=s3cr3t-do-not-leak\n",
	}}
}

// CleanPath returns the canonical form of a file path: backslashes become
// slashes, [path.Clean] applies (so "./" and "a/../" go), and leading slashes
// are removed, so "/README.md", "./README.md" and "chapters/../README.md" all
// name "README.md". A path that climbs above the root ("..", "../x",
// "a/../../x") or names the root itself ("", ".", "/") is an error wrapping
// [ErrInvalidPath].
//
// The escape test runs before the leading slash is removed, as toolgate's
// policy.NormalizeTarget does, so that the server and the policy agree on
// which paths escape: "/../x" is "/x" to both (a rooted path cannot climb),
// and this server reads it as "x".
func CleanPath(p string) (string, error) {
	c := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q climbs out of the root", ErrInvalidPath, p)
	}
	c = strings.TrimLeft(c, "/")
	if c == "" || c == "." {
		return "", fmt.Errorf("%w: %q names no file", ErrInvalidPath, p)
	}
	return c, nil
}

// Read returns the content of the file at p, or an error wrapping
// [ErrNotFound] or [ErrInvalidPath].
func (f *Files) Read(p string) (string, error) {
	c, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	content, ok := f.files[c]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNotFound, c)
	}
	return content, nil
}

// Write creates or replaces the file at p. Its only error wraps
// [ErrInvalidPath].
func (f *Files) Write(p, content string) error {
	c, err := CleanPath(p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[c] = content
	return nil
}

// Delete removes the file at p, or returns an error wrapping [ErrNotFound]
// or [ErrInvalidPath].
func (f *Files) Delete(p string) error {
	c, err := CleanPath(p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[c]; !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, c)
	}
	delete(f.files, c)
	return nil
}

// List returns the paths of all files, sorted. It never returns nil.
func (f *Files) List() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	names := slices.Sorted(maps.Keys(f.files))
	if names == nil {
		names = []string{} // so that JSON shows [] rather than null
	}
	return names
}
