package policy_test

import (
	"bytes"
	"io/fs"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
)

// TestFlakyFailureReported: a test that fails, and passes when run again
// traced (it reads something that changes: http.send here), is reported
// failed, and the run is not OK.
func TestFlakyFailureReported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			w.Write([]byte(`{"ok": false}`))
			return
		}
		w.Write([]byte(`{"ok": true}`))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	tree := fstest.MapFS{"r_test.rego": {Data: []byte("package p_test\n\ntest_remote if {\n\thttp.send({\"method\": \"GET\", \"url\": \"http://" + ln.Addr().String() + "/\"}).body.ok\n}\n")}}
	var out bytes.Buffer
	sum, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"t": tree}, policy.TestOptions{Capabilities: []string{"http.send"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if n.Load() < 1 {
		t.Fatal("the test did not run")
	}
	if sum.OK() || sum.Failed == 0 {
		t.Errorf("test_remote failed (first request %d of %d), yet the run is %+v, OK=%v:\n%s", 1, n.Load(), sum, sum.OK(), out.String())
	}
}

// TestDuplicateNamesFailureReported: of two tests of one name in two
// files of one package (OPA renames one test_x#01, in no fixed order), the
// failing one is reported failed, whichever the traced run re-runs.
func TestDuplicateNamesFailureReported(t *testing.T) {
	tree := fstest.MapFS{
		"a_test.rego": {Data: []byte("package p_test\n\ntest_x if {\n\t1 == 1\n}\n")},
		"b_test.rego": {Data: []byte("package p_test\n\ntest_x if {\n\t1 == 2\n}\n")},
	}
	for i := range 30 {
		var out bytes.Buffer
		sum, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"t": tree}, policy.TestOptions{})
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if sum.Failed != 1 || sum.Passed != 1 {
			t.Fatalf("run %d: one of the two test_x fails, the run is %+v OK=%v:\n%s", i, sum, sum.OK(), out.String())
		}
	}
}
