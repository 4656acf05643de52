package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// BenchmarkServeAsk is the serve command's ask cycle in process, as
// toolgate-bench's "toolgate ask (memory)" row runs it across processes:
// the agent's call parked, announced by CloudEvent to an approver that
// approves it at once through the approvals API, run and answered; beside
// the same binary's allowed call. Its allocations (the agent's and the
// approver's included) are what the ask pays in the collector, and
// -memprofile says whose they are. With $TOOLGATE_TEST_REDIS_ADDR the same
// runs against a toolgate parking in Redis too, as the "toolgate ask
// (Redis)" row does.
func BenchmarkServeAsk(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchServeAsk(b, "  store: memory\n") })
	if addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR"); addr != "" {
		b.Run("redis", func(b *testing.B) {
			benchServeAsk(b, redisPending(addr))
		})
	}
}

// processCPU is the user and system CPU this process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchServeAsk(b *testing.B, pending string) {
	up := testkit.NewUpstream(b, nil)
	addrs := testkit.FreeAddrs(b, 3)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	approver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Type, ID string }
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		if ev.Type != "dev.toolgate.approval.requested" {
			return
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addrs[1]+"/api/approvals/"+ev.ID, strings.NewReader(`{"decision":"approve"}`))
		req.Header.Set("Authorization", "Bearer approver-key-0123456789")
		req.Header.Set("Content-Type", "application/json")
		if res, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}))
	b.Cleanup(approver.Close)
	dir := writeFiles(b, b.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: "` + addrs[0] + `", approvals: "` + addrs[1] + `", admin: "` + addrs[2] + `"}
upstreams: [{name: tools, url: "` + up.URL + `"}]
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent, groups: [agents]}]
policy: {rules_file: ./rules.yaml, watch: false}
pending:
` + pending + `approvals:
  secret: "` + testSecret + `"
  approvers: [{name: bench-approver, key: approver-key-0123456789}]
  notify: [{url: "` + approver.URL + `", format: cloudevents}]
log: {level: info}
`,
		"rules.yaml": "rules:\n  - {id: a, effect: allow, tool: read_file, target: \"docs/**\"}\n  - {id: q, effect: ask, tool: write_note, target: \"notes/**\"}\n",
	})
	r := startServe(b, []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")}, nil)
	for _, bc := range []struct{ name, tool, path string }{
		{"allow", "read_file", "docs/a"},
		{"ask-approved", "write_note", "notes/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			cpu0 := processCPU(b)
			for b.Loop() {
				n++
				// Each call its own arguments: an identical one would attach.
				body := `{"path":"` + bc.path + strconv.Itoa(n) + `.txt","pad":"` + strings.Repeat("x", 150) + `"}`
				req, _ := http.NewRequest(http.MethodPost, r.proxy+"/tools/"+bc.tool, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer agent-key-0123456789")
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("%s: status %d", bc.name, res.StatusCode)
				}
				r.stderr.Reset() // the log lines, kept in memory here, are a file's in a real run
			}
			// The process's CPU, the agent's, approver's and upstream's
			// included: steadier than ns/op, which is mostly waiting.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
