package policy_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestRowsOfTheCallChecked: a table chosen by the call, with a deny row
// whose effect is "Deny" (which the library would skip), in the shapes a
// table may take: an else branch, rows iterated, a row built by
// object.union, by a function or under a with. Each is refused as the
// policy loads, where the row can be read without a call, or else the
// library denies the call that reads the row (toolgate.bad_row): the env
// file is never read.
func TestRowsOfTheCallChecked(t *testing.T) {
	const all = `{"id": "all", "effect": "allow", "tool": "*", "target": "*"}`
	const bad = `{"id": "env", "effect": "Deny", "tool": "read_file", "target": "**/.env"}`
	for name, src := range map[string]string{
		"else branch":  "package toolgate\n\nrules := [" + all + "] if input.upstream.name == \"a\"\nelse := [" + bad + ", " + all + "] if input.upstream.name == \"b\"\n",
		"object.union": "package toolgate\n\nrules contains " + all + "\n\nrules contains object.union({\"id\": \"env\", \"tool\": \"read_file\", \"target\": \"**/.env\"}, {\"effect\": \"Deny\"}) if input.tool\n",
		"with":         "package toolgate\n\neff := \"deny\"\n\nrow := {\"id\": \"env\", \"effect\": eff, \"tool\": \"read_file\", \"target\": \"**/.env\"}\n\nrules contains " + all + "\n\nrules contains r if { input.tool; r := row with eff as \"Deny\" }\n",
		"iteration":    "package toolgate\n\nrows := [" + bad + ", " + all + "]\n\nrules contains " + all + "\n\nrules contains r if { input.tool; r := rows[_] }\n",
		"function":     "package toolgate\n\nrow(e) := {\"id\": \"env\", \"effect\": e, \"tool\": \"read_file\", \"target\": \"**/.env\"}\n\nrules contains " + all + "\n\nrules contains row(\"Deny\") if input.tool\n",
	} {
		t.Run(name, func(t *testing.T) {
			e, err := policy.New(t.Context(), policy.Options{
				Library: shipped.Library(), NativeLibrary: true,
				Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}},
			})
			if err != nil {
				if !strings.Contains(err.Error(), `effect "Deny"`) {
					t.Fatalf("refused with %v; want the row with effect \"Deny\" named", err)
				}
				return
			}
			in := call("read_file", "a/.env")
			in.Upstream.Name = "b"
			d, derr := e.Decide(t.Context(), in)
			if derr != nil || d.Action != policy.Deny || !slices.Contains(d.RuleIDs(), "toolgate.bad_row") {
				t.Fatalf("loaded; read_file a/.env (upstream b) is %v %v (%v); want the row refused at load, or the call denied as toolgate.bad_row", d.Action, d.RuleIDs(), derr)
			}
			if !strings.Contains(d.Messages()[0], "rules table row env cannot be read") {
				t.Errorf("the reason %q does not name the row", d.Messages())
			}
		})
	}
}

// TestRowCheckTimeBound: the rows of a table of some calls are checked
// within the decision timeout, as the whole table is: one fetched by
// http.send from a service that does not answer does not hold the load
// (or a reload) for the request's own timeout.
func TestRowCheckTimeBound(t *testing.T) {
	const all = `{"id": "all", "effect": "allow", "tool": "*", "target": "*"}`
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = w.Write([]byte(`[` + all + `]`))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	mod := "package toolgate\n\nfetched := http.send({\"method\": \"GET\", \"url\": \"" + srv.URL + "\", \"timeout\": \"8s\"}).body\n\nrules := fetched if input.tool\n"
	start := time.Now()
	_, _ = policy.New(t.Context(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true, Capabilities: []string{"http.send"},
		Policies: fstest.MapFS{"t.rego": {Data: []byte(mod)}}, Timeout: 300 * time.Millisecond,
	})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("loading took %v with a decision timeout of 300ms", took)
	}
}
