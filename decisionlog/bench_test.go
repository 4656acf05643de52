package decisionlog_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/proxy"
)

// BenchmarkToolCallDecisionLog is an allowed call through the proxy with no
// decision log, with the console decision log, and with the console
// decision log and a mask policy (arguments logged, one erased, one
// upserted). The logger's work runs on its own goroutine; this measures
// what it adds to a call, CPU contention included.
func BenchmarkToolCallDecisionLog(b *testing.B) {
	body := `{"user":"ann","password":"hunter2","token":"tok","content":"` + strings.Repeat("x", 150) + `"}`
	run := func(b *testing.B, base string) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		b.ReportAllocs()
		for b.Loop() {
			res, err := client.Post(base+"/tools/login", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Fatalf("status %d", res.StatusCode)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		log   bool
	}{
		{"no-log", map[string]string{"p.rego": testPolicy}, false},
		{"console", map[string]string{"p.rego": testPolicy}, true},
		{"console-mask", map[string]string{"p.rego": testPolicy, "mask.rego": testMask}, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEngine(b, tc.files)
			var dl proxy.DecisionLogger
			if tc.log {
				l, _ := newLogger(b, e, decisionlog.Options{Arguments: true, Console: slog.NewJSONHandler(io.Discard, nil)})
				dl = adapter{l, e}
			}
			run(b, newProxy(b, e, dl, nil))
		})
	}
}
