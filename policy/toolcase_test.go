package policy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestToolNameInAnotherCase: a call whose tool name the rules table names
// only in another case, or that a glob row matches only without regard to
// case, is denied before the policy (a router that ignores case would run
// it as the table's tool); names the table spells alike, and names it does
// not name at all, are decided as before. With OPA evaluating the library
// too.
func TestToolNameInAnotherCase(t *testing.T) {
	rows := []string{
		`{id: docs, effect: allow, tool: "*", target: "docs/**"}`,
		`{id: del, effect: deny, tool: delete_file, target: "*"}`,
		`{id: rm, effect: deny, tool: "rm_*", target: "*"}`,
		`{id: read, effect: allow, tool: Read, target: "*"}`,
		`{id: report, effect: allow, tool: report, target: "*"}`,
		`{id: reports, effect: allow, tool: "report.*", target: "*"}`,
		`{id: drop, effect: deny, tool: "drop_?", target: "*"}`,
		`{id: fs, effect: allow, tool: "fs_*", target: "*"}`,
		`{id: fs-delete, effect: deny, tool: fs_delete, target: "*"}`,
		`{id: deploys, effect: ask, tool: "deploy_*", target: "*"}`,
		`{id: prod, effect: deny, tool: deploy_prod, target: "*"}`,
	}
	for _, native := range []bool{true, false} {
		opts := policy.Options{RulesFile: writeRules(t, t.TempDir(), rows)}
		if !native {
			opts.Library = shipped.Library() // NativeLibrary off: OPA evaluates the table
		}
		e := newEngine(t, opts)
		for _, tc := range []struct {
			tool string
			want outcome
		}{
			{"delete_file", outcome{"deny", []string{"del"}}},
			{"DELETE_FILE", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"Delete_File", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"RM_rf", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"rm_rf", outcome{"deny", []string{"rm"}}},
			{"read", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"Read", outcome{"allow", []string{"docs", "read"}}},
			{"write_note", outcome{"allow", []string{"docs"}}},
			{"Write_Note", outcome{"allow", []string{"docs"}}},
			// Rails' (.:format) and Spring's suffix match run delete_file.
			{"delete_file.json", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"Delete_File.XML", outcome{"deny", []string{"toolgate.tool_case"}}},
			// Any suffix: no list of formats covers Rails' or Spring's.
			{"delete_file.v2", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"delete_file.zzz", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"delete_file.", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"delete_file.json.zzz", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"drop_x.md", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"write_note.v2", outcome{"allow", []string{"docs"}}}, // named by no row: decided as spelt
			// A broader glob that names it as spelt does not hide the row
			// that denies (or asks) its prefix, unless that glob denies.
			{"fs_delete.json", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"fs_read.json", outcome{"allow", []string{"docs", "fs"}}},
			{"deploy_prod.zzz", outcome{"deny", []string{"toolgate.tool_case"}}},
			// A glob row's name with a suffix, and a name a glob row names
			// as spelt (a tool of its own).
			{"rm_x.json", outcome{"deny", []string{"rm"}}}, // rm_* matches it as spelt
			{"drop_x.xml", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"DROP_X.json", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"report.csv", outcome{"allow", []string{"docs", "reports"}}},
		} {
			if got := decide(t, e, call(tc.tool, "docs/a")); !cmp.Equal(got, tc.want) {
				t.Errorf("native %v: %s: %v, want %v", native, tc.tool, got, tc.want)
			}
		}
	}
}

// TestToolCaseLeavesMCPAlone: MCP servers look tool names up exactly, so
// an MCP call of a name the table names in another case is decided as
// spelt; policy eval (DecideValue) denies a REST one as the proxy does.
func TestToolCaseLeavesMCPAlone(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), []string{
		`{id: all, effect: allow, tool: "*", target: "*"}`,
		`{id: del, effect: deny, tool: delete_file, target: "*"}`,
	})})
	in := call("DELETE_FILE", "a")
	in.Kind, in.Upstream.Protocol = policy.KindMCP, "mcp"
	if got := decide(t, e, in); got.Action != "allow" {
		t.Errorf("MCP DELETE_FILE: %v, want allow", got)
	}
	v, err := ast.InterfaceToValue(map[string]any{"kind": "rest", "tool": map[string]any{"name": "DELETE_FILE"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.DecideValue(t.Context(), v)
	if err != nil || d.Action != policy.Deny || d.RuleIDs()[0] != "toolgate.tool_case" {
		t.Errorf("DecideValue: %v %v %v, want a toolgate.tool_case deny", d.Action, d.RuleIDs(), err)
	}
}

// TestToolSuffixBehindAnAskGlob: in a table of rows that all deny or ask,
// an ask glob naming fs_delete.json as spelt does not turn the deny of
// fs_delete, which Rails and Spring run it as, into an ask.
func TestToolSuffixBehindAnAskGlob(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), []string{
		`{id: fs, effect: ask, tool: "fs_*", target: "*"}`,
		`{id: fs-delete, effect: deny, tool: fs_delete, target: "*"}`,
	})})
	for tool, want := range map[string]outcome{
		"fs_delete.json": {"deny", []string{"toolgate.tool_case"}},
		"fs_read":        {"ask", []string{"fs"}},
	} {
		if got := decide(t, e, call(tool, "docs/a")); !cmp.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tool, got, want)
		}
	}
}

// TestToolSuffixUnderAnAskGlob: an ask glob that names a dotted tool as
// spelt, and its prefix as well, decides the name: it is asked, not denied
// as another tool (github.issues.create under github.*).
func TestToolSuffixUnderAnAskGlob(t *testing.T) {
	for name, rows := range map[string][]string{
		"mixed": {
			`{id: all, effect: allow, tool: "*", target: "*"}`,
			`{id: gh, effect: ask, tool: "github.*", target: "*"}`,
			`{id: deploys, effect: ask, tool: "deploy_*", target: "*"}`,
		},
		"every row asks": { // tc.strict = tc
			`{id: gh, effect: ask, tool: "github.*", target: "*"}`,
			`{id: deploys, effect: ask, tool: "deploy_*", target: "*"}`,
		},
	} {
		e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), rows)})
		for tool, want := range map[string]outcome{
			"github.issues":        {"ask", []string{"gh"}},
			"github.issues.create": {"ask", []string{"gh"}},      // real dotted tool name
			"deploy_web.v2":        {"ask", []string{"deploys"}}, // Rails runs deploy_web: asked either way
		} {
			if got := decide(t, e, call(tool, "docs/a")); !cmp.Equal(got, want) {
				t.Errorf("%s: %s: %v, want %v", name, tool, got, want)
			}
		}
	}
}

// TestToolSuffixBehindANarrowDenyGlob: a deny glob that names
// fs_delete.json as spelt but only for some targets (/etc/**) does not
// excuse it from the deny (or ask) of fs_delete, which Rails runs it as.
func TestToolSuffixBehindANarrowDenyGlob(t *testing.T) {
	for _, effect := range []string{"deny", "ask"} {
		rows := []string{
			`{id: all, effect: allow, tool: "*", target: "*"}`,
			`{id: fs-delete, effect: ` + effect + `, tool: fs_delete, target: "*"}`,
			`{id: fs-etc, effect: deny, tool: "fs_*", target: "/etc/**"}`,
		}
		for _, native := range []bool{true, false} {
			opts := policy.Options{RulesFile: writeRules(t, t.TempDir(), rows)}
			if !native {
				opts.Library = shipped.Library()
			}
			e := newEngine(t, opts)
			if got := decide(t, e, call("fs_delete", "docs/a")); got.Action != effect {
				t.Fatalf("fs_delete itself: %v, want %s", got, effect)
			}
			if got := decide(t, e, call("fs_delete.json", "docs/a")); got.Action == "allow" {
				t.Errorf("%s row, native %v: fs_delete.json on docs/a: %v; Rails runs fs_delete", effect, native, got)
			}
		}
	}
}

// TestToolCaseForServedTables: a rules table served from a data file (as
// an array or an object) or defined in the user's Rego gets the same
// check as a rules file's: a case variant or a suffixed name of a denied
// tool is denied, with either evaluation.
func TestToolCaseForServedTables(t *testing.T) {
	const deny = `{"id": "del", "effect": "deny", "tool": "delete_file", "target": "*"}`
	const all = `{"id": "all", "effect": "allow", "tool": "*", "target": "*"}`
	for name, files := range map[string]fstest.MapFS{
		"data file, array":  {"toolgate/data.json": {Data: []byte(`{"rules": [` + deny + `, ` + all + `]}`)}},
		"data file, object": {"toolgate/data.json": {Data: []byte(`{"rules": {"a": ` + deny + `, "b": ` + all + `}}`)}},
		"Rego":              {"t.rego": {Data: []byte("package toolgate\n\nrules := [" + deny + ", " + all + "]\n")}},
	} {
		for _, native := range []bool{true, false} {
			e := newEngine(t, policy.Options{Library: shipped.Library(), NativeLibrary: native, Policies: files})
			if got := decide(t, e, call("write_note", "docs/a")); got.Action != "allow" {
				t.Fatalf("%s: the table is not read: %v", name, got)
			}
			for _, tool := range []string{"delete_file.json", "DELETE_FILE", "delete_file.", "Delete_File.xml"} {
				if got, want := decide(t, e, call(tool, "docs/a")), (outcome{"deny", []string{"toolgate.tool_case"}}); !cmp.Equal(got, want) {
					t.Errorf("%s, native %v: %s: %v, want %v", name, native, tool, got, want)
				}
			}
		}
	}
}

// TestToolSuffixWithARowOfItsOwn: a dotted name's own row does not excuse
// it from the row that denies or asks about its prefix, whatever that own
// row says: Rails and Spring run db.read as db.
func TestToolSuffixWithARowOfItsOwn(t *testing.T) {
	rows := []string{
		`{id: all, effect: allow, tool: "*", target: "*"}`,
		`{id: db, effect: deny, tool: db, target: "*"}`,
		`{id: db-read-secrets, effect: deny, tool: db.read, target: "secrets/**"}`,
		`{id: git, effect: ask, tool: git, target: "*"}`,
		`{id: git-status, effect: allow, tool: git.status, target: "*"}`,
		`{id: fs, effect: allow, tool: fs, target: "*"}`,
		`{id: fs-write, effect: allow, tool: fs.write, target: "*"}`,
	}
	for _, native := range []bool{true, false} {
		opts := policy.Options{RulesFile: writeRules(t, t.TempDir(), rows)}
		if !native {
			opts.Library = shipped.Library()
		}
		e := newEngine(t, opts)
		for _, tc := range []struct {
			tool string
			want outcome
		}{
			{"db.read", outcome{"deny", []string{"toolgate.tool_case"}}},
			{"git.status", outcome{"deny", []string{"toolgate.tool_case"}}},
			// A prefix that is only allowed leaves the dotted tool its own.
			{"fs.write", outcome{"allow", []string{"all", "fs-write"}}},
		} {
			if got := decide(t, e, call(tc.tool, "public/x")); !cmp.Equal(got, tc.want) {
				t.Errorf("native %v: %s: %v, want %v", native, tc.tool, got, tc.want)
			}
		}
	}
}

// TestServedTableLoads: a served table's malformed glob row, which fails
// every decision that reaches it in the library, refuses the policy with
// the glob named, as a rules file's does; and a table fetched by http.send
// does not hold the load past the decision timeout, and is refused rather
// than loaded without its tool-name check when it is not there in time.
func TestServedTableLoads(t *testing.T) {
	const all = `{"id": "all", "effect": "allow", "tool": "*", "target": "*"}`
	const bad = `{"id": "bad", "effect": "deny", "tool": "legacy_[", "target": "*"}`
	_, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{
		"toolgate/data.json": {Data: []byte(`{"rules": [` + bad + `, ` + all + `]}`)},
	}})
	if err == nil || !strings.Contains(err.Error(), `"legacy_[" has an unclosed [`) {
		t.Errorf("a malformed served glob: %v, want an error naming it", err)
	}

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = w.Write([]byte(`[` + all + `]`))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	mod := "package toolgate\n\nrules := http.send({\"method\": \"GET\", \"url\": \"" + srv.URL + "\", \"timeout\": \"30s\"}).body\n"
	start := time.Now()
	// Not loaded without its rows: the tool-name check would be off.
	if _, err := policy.New(t.Context(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true, Capabilities: []string{"http.send"},
		Policies: fstest.MapFS{"t.rego": {Data: []byte(mod)}}, Timeout: 300 * time.Millisecond,
	}); err == nil || !strings.Contains(err.Error(), "evaluating the rules table") {
		t.Errorf("a table not evaluated in time: %v, want the load refused", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("loading took %v with a decision timeout of 300ms", took)
	}
}

// TestServedTableOfTheCallLoads: a table chosen by the call (two bodies of
// rules that conflict without input, exactly one of which holds for any
// call) fails to evaluate at load, and loads, as a table that depends on
// the call does, without the tool-name check.
func TestServedTableOfTheCallLoads(t *testing.T) {
	mod := `package toolgate

fs_rows := [{"id": "all", "effect": "allow", "tool": "*", "target": "*"}]
db_rows := [{"id": "del", "effect": "deny", "tool": "drop_table", "target": "*"}, {"id": "all", "effect": "allow", "tool": "*", "target": "*"}]

rules := fs_rows if not input.upstream.name == "db"
rules := db_rows if not input.upstream.name == "fs"
`
	if _, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{"t.rego": {Data: []byte(mod)}}}); err != nil {
		t.Fatalf("a table chosen by the call refused at load: %v", err)
	}
}

// TestServedTableDownAtLoad: a table fetched by http.send from a service
// that is down as the policy loads (a built-in error, not a timeout) does
// not load without its tool-name check, which would be off for the
// policy's life once the service answers: the load is refused.
func TestServedTableDownAtLoad(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL
	down.Close() // connections refused
	mod := "package toolgate\n\nrules := http.send({\"method\": \"GET\", \"url\": \"" + url + "\", \"timeout\": \"2s\"}).body\n"
	_, err := policy.New(t.Context(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true, Capabilities: []string{"http.send"},
		Policies: fstest.MapFS{"t.rego": {Data: []byte(mod)}},
	})
	if err == nil || !strings.Contains(err.Error(), "evaluating the rules table") {
		t.Errorf("a table whose service is down at load: %v, want the load refused", err)
	}
}
