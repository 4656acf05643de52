package testkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// listed is what `go list -deps -json` says of one package.
type listed struct {
	ImportPath string
	Standard   bool
	DepOnly    bool
	Imports    []string
}

// deps runs `go list -deps` on pkg (a package pattern such as ".", which
// must match one package) and returns pkg and the packages it depends on,
// its tests' imports not counted. Any failure of go list fails the test:
// a dependency rule that cannot be checked does not pass.
func deps(tb testing.TB, pkg string) (self listed, all []listed) {
	tb.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,DepOnly,Imports", pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	var selves []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			tb.Fatalf("go list -deps %s: %v", pkg, err)
		}
		if p.DepOnly {
			all = append(all, p)
		} else {
			selves = append(selves, p)
		}
	}
	if len(selves) != 1 {
		tb.Fatalf("go list -deps %s listed %d packages of its own, want 1", pkg, len(selves))
	}
	return selves[0], all
}

// under reports whether path is pattern or, for a pattern ending in
// "/...", the package before it or one below it.
func under(path, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// CheckDeps fails the test for every package pkg depends on, directly or
// not, that matches one of forbidden: an import path, or a path ending in
// "/..." for it and everything below it. pkg itself is not counted.
func CheckDeps(tb testing.TB, pkg string, forbidden ...string) {
	tb.Helper()
	self, all := deps(tb, pkg)
	for _, p := range all {
		for _, f := range forbidden {
			if under(p.ImportPath, f) {
				tb.Errorf("%s must not depend on %s", self.ImportPath, p.ImportPath)
			}
		}
	}
}

// CheckImports is CheckDeps for the packages pkg imports itself: what they
// import in turn is not checked.
func CheckImports(tb testing.TB, pkg string, forbidden ...string) {
	tb.Helper()
	self, _ := deps(tb, pkg)
	for _, imp := range self.Imports {
		for _, f := range forbidden {
			if under(imp, f) {
				tb.Errorf("%s must not import %s", self.ImportPath, imp)
			}
		}
	}
}

// CheckStdlibOnly fails the test for every package outside the standard
// library that pkg depends on.
func CheckStdlibOnly(tb testing.TB, pkg string, allowed ...string) {
	tb.Helper()
	self, all := deps(tb, pkg)
	for _, p := range all {
		if !p.Standard && !slices.Contains(allowed, p.ImportPath) {
			tb.Errorf("%s must depend on the standard library only, not %s", self.ImportPath, p.ImportPath)
		}
	}
}
