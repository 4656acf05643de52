package policy_test

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// Rows: an allow row for docs/**, and a deny row for docs/.env whose
// effect is "Deny" (not a row the library can read): the load cannot see
// it (it exists only for some calls), so the library must deny the call
// as toolgate.bad_row rather than skip the row and allow it.
const (
	testAllow = `{"id": "docs", "effect": "allow", "tool": "read_file", "target": "docs/**"}`
	testBad   = `{"id": "env", "effect": "Deny", "tool": "read_file", "target": "docs/.env"}`
)

func testDecideWith(t *testing.T, e *policy.Engine) policy.Decision {
	t.Helper()
	d, _ := e.Decide(t.Context(), call("read_file", "docs/.env"))
	return d
}

func testCheck(t *testing.T, d policy.Decision) {
	t.Helper()
	if d.Action == policy.Allow || !slices.Contains(d.RuleIDs(), "toolgate.bad_row") {
		t.Errorf("read_file docs/.env: %v %v: the malformed deny row (effect \"Deny\"), known only at the call, was skipped: data.toolgate.rules_checked was set for a table the load did not check", d.Action, d.RuleIDs())
	}
}

// TestFlagTimeTable: a table the user's Rego builds without reading the
// call, but that is undefined at load and defined later (by the clock
// here), is not marked checked: its malformed deny row, which the load
// never saw, denies the call (toolgate.bad_row) when the table appears.
func TestFlagTimeTable(t *testing.T) {
	from := time.Now().Add(1500 * time.Millisecond).UnixNano()
	src := fmt.Sprintf("package toolgate\nrules := [%s, bad] if { time.now_ns() > %d; bad := %s }\n", testAllow, from, testBad)
	e, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}})
	if err != nil {
		t.Fatalf("refused at load: %v", err)
	}
	time.Sleep(time.Until(time.Unix(0, from)) + 300*time.Millisecond)
	testCheck(t, testDecideWith(t, e))
}

// TestFlagHTTPTable: a table fetched by http.send is checked as the
// policy loads, and fetched again at every call: it is not marked checked,
// and a malformed deny row the service serves later denies the call.
func TestFlagHTTPTable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			w.Write([]byte("[" + testAllow + "]"))
			return
		}
		w.Write([]byte("[" + testAllow + ", " + testBad + "]"))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	src := "package toolgate\n\nrules := http.send({\"method\": \"GET\", \"url\": \"http://" + ln.Addr().String() + "/\"}).body\n"
	e, err := policy.New(t.Context(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true, Capabilities: []string{"http.send"},
		Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}},
	})
	if err != nil {
		t.Fatalf("refused at load: %v", err)
	}
	testCheck(t, testDecideWith(t, e))
}
