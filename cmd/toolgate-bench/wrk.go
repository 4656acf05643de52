package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what the script's done() prints (latencies in µs).
type wrkResult struct {
	Requests   int64   `json:"requests"`
	DurationUS int64   `json:"duration_us"`
	Status     int64   `json:"status"` // answers that were not 2xx or 3xx
	Connect    int64   `json:"connect"`
	Read       int64   `json:"read"`
	Write      int64   `json:"write"`
	Timeout    int64   `json:"timeout"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
}

// luaScript sets up the request and prints the summary as one JSON line,
// so nothing depends on wrk's human-readable output. An -mcp row's calls
// carry a JSON-RPC id each and take turns over sessions (none in
// stateless mode).
func luaScript(t *target, agentKey string, sessions []string) string {
	var b strings.Builder
	b.WriteString("wrk.method = \"POST\"\n")
	for k, v := range t.headers(agentKey) {
		fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", k, v[0])
	}
	switch {
	case t.idTemplate() != "":
		fmt.Fprintf(&b, "local template = %q\nlocal sessions = {", t.idTemplate())
		for i, id := range sessions {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", id)
		}
		b.WriteString("}\nlocal n = 0\n")
		b.WriteString("request = function()\n  n = n + 1\n  if #sessions > 0 then\n    wrk.headers[\"Mcp-Session-Id\"] = sessions[n % #sessions + 1]\n  end\n  return wrk.format(nil, nil, nil, string.format(template, n))\nend\n")
	case t.unique:
		fmt.Fprintf(&b, "local template = %q\nlocal nonce = %q\nlocal n = 0\n", askTemplate, secret()[:12])
		b.WriteString("request = function()\n  n = n + 1\n  return wrk.format(nil, nil, nil, string.format(template, nonce, n))\nend\n")
	default:
		fmt.Fprintf(&b, "wrk.body = %q\n", t.body)
	}
	b.WriteString(`done = function(s, latency, requests)
  io.write(string.format('BENCHJSON {"requests":%d,"duration_us":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50":%d,"p99":%d}\n',
    s.requests, s.duration, s.errors.status, s.errors.connect, s.errors.read, s.errors.write, s.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`)
	return b.String()
}

// runWrk drives t with conns connections for d, one wrk thread (the load
// generator has one core).
func runWrk(ctx context.Context, dir string, t *target, agentKey string, sessions []string, conns int, d time.Duration) (*wrkResult, error) {
	script := filepath.Join(dir, "wrk.lua")
	if err := os.WriteFile(script, []byte(luaScript(t, agentKey, sessions)), 0o600); err != nil {
		return nil, err
	}
	secs := max(1, int(d.Round(time.Second)/time.Second))
	cmd := exec.CommandContext(ctx, "wrk", "-t1", "-c"+strconv.Itoa(conns), "-d"+strconv.Itoa(secs)+"s", "--timeout", "30s", "-s", script, t.url)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("wrk %s: %w: %s", t.name, err, errb.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "BENCHJSON "); ok {
			var r wrkResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return nil, fmt.Errorf("wrk %s: %w", t.name, err)
			}
			return &r, nil
		}
	}
	return nil, fmt.Errorf("wrk %s printed no summary: %s", t.name, out.String())
}
