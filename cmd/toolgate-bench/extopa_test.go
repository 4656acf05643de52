package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/toolgate/toolgate/internal/testkit"
)

// opaServer answers OPA's data API (POST /v1/data/bench/decision) with the
// real OPA engine evaluating the files writeExtOPA writes.
func opaServer(t *testing.T) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	if err := writeExtOPA(dir, withRows(table, defaultRows)); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "policy.rego"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	pq, err := rego.New(rego.Query("data.bench.decision"), rego.Module("policy.rego", string(mod)),
		rego.Store(inmem.NewFromObject(data)), rego.StrictBuiltinErrors(true)).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/data/bench/decision" {
			http.NotFound(w, r)
			return
		}
		var req struct{ Input any }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rs, err := pq.Eval(r.Context(), rego.EvalParsedInput(mustValue(t, req.Input)))
		if err != nil || len(rs) != 1 {
			http.Error(w, "no decision", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"result": rs[0].Expressions[0].Value})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func mustValue(t *testing.T, v any) ast.Value {
	v2, err := ast.InterfaceToValue(v)
	if err != nil {
		t.Error(err)
	}
	return v2
}

// TestExtOPAPolicy checks that the external OPA's policy decides the
// rules table as the README's "Rules table" section says toolgate does:
// exact names match only themselves, * matches every call of the tool,
// globs use / as separator, and deny > ask > allow.
func TestExtOPAPolicy(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	u, _ := url.Parse(up.URL)
	proxy := httptest.NewServer(extOPAHandler(u, opaServer(t).URL+"/v1/data/bench/decision"))
	defer proxy.Close()

	for _, c := range []struct {
		tool, path string
		forwarded  bool
	}{
		{"read_file", "docs/guide/intro.md", true},    // r1
		{"read_file", "./docs//guide/intro.md", true}, // cleaned like toolgate's target
		{"read_file", "docs/.env", false},             // r2 deny beats r1 allow
		{"read_file", "src/main.go", true},            // r8
		{"read_file", "src/pkg/main.go", false},       // * stays within a segment
		{"read_file", "README.md", false},             // nothing fired: deny
		{"write_note", "notes/today.txt", false},      // r3 ask: this proxy cannot park
		{"delete_file", "docs/a.md", false},           // r4
		{"list_dir", "docs", true},                    // r5
		{"list_dir", "secrets/keys", false},           // r7 (tool *) beats r5
		{"search.web", "x", true},                     // r6 tool glob
		{"search", "x", false},                        // the glob needs the dot
		{"read_file.bak", "docs/a.md", false},         // exact tool names match only themselves
	} {
		before := len(up.Requests())
		body := `{"path":` + strings.ReplaceAll(`"`+c.path+`"`, `\`, `\\`) + `}`
		res, err := http.Post(proxy.URL+"/tools/"+c.tool, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		reached := len(up.Requests()) - before
		if got := res.StatusCode == http.StatusOK && reached == 1; got != c.forwarded {
			t.Errorf("%s %s: status %d, upstream received %d; want forwarded=%v", c.tool, c.path, res.StatusCode, reached, c.forwarded)
		}
		if !c.forwarded && reached != 0 {
			t.Errorf("%s %s: a refused call reached the upstream", c.tool, c.path)
		}
	}
}

// TestExtOPAFailsClosed: without an answer from OPA nothing is forwarded.
func TestExtOPAFailsClosed(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	u, _ := url.Parse(up.URL)
	for name, opaURL := range map[string]string{
		"unreachable": "http://127.0.0.1:1/v1/data/bench/decision",
		"undefined":   opaServer(t).URL + "/v1/data/bench/none",
	} {
		proxy := httptest.NewServer(extOPAHandler(u, opaURL))
		res, err := http.Post(proxy.URL+"/tools/read_file", "application/json", strings.NewReader(readBody))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		proxy.Close()
		if n := len(up.Requests()); res.StatusCode != http.StatusForbidden || n != 0 {
			t.Errorf("%s: status %d, upstream received %d calls; want 403 and none", name, res.StatusCode, n)
		}
	}
}
