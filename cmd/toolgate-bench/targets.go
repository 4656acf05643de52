package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// bodySize is the size of every request body, as in the reference
// figures.
const bodySize = 200

// pad fills the "pad" member of a JSON body so that the body is bodySize
// bytes once formatting has made it grow bytes longer.
func pad(s string, grow int) string {
	i := strings.Index(s, `"pad":""`) + len(`"pad":"`)
	n := bodySize - len(s) - grow
	if n < 0 {
		panic("body template too long: " + s)
	}
	return s[:i] + strings.Repeat("x", n) + s[i:]
}

var (
	readBody   = pad(`{"path":"docs/guide/intro.md","pad":""}`, 0)
	deleteBody = pad(`{"path":"docs/guide/intro.md","pad":""}`, 0)
	// askTemplate is formatted per request with a 12-character run nonce
	// and a 10-digit counter (%s and %010d grow by 15 bytes), so that no
	// call attaches to an earlier identical one.
	askTemplate = pad(`{"path":"notes/b-%s-%010d.txt","pad":""}`, 15)
	mcpBody     = pad(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"docs/guide/intro.md","pad":""}}}`, 0)
)

// target is one server and path under load.
type target struct {
	name   string
	ref    string // the direct row this one is compared with
	url    string
	body   string // a fixed body, or
	unique bool   // askTemplate, one distinct call per request
	mcp    bool
	mode   *mcpMode // the -mcp rows: a real MCP server's mode, bodies with a JSON-RPC id per call
	bare   string   // the bare-proxy row this one is compared with ("" for "bare proxy")
	expect int      // the status every answer must have
	procs  []*proc  // whose CPU counts; the first is "the server"
	parts  []string // names of the procs in the CPU column, when there are several
	// upstreamCPU: the last of procs is the upstream, shown in the CPU
	// column but left out of the ratios (which compare the servers in
	// front of it, as the REST rows do).
	upstreamCPU bool
	reaches     bool // whether the upstream must receive every call
	redis       bool // its calls are kept in Redis: what Redis did is read too (rediscost.go)
}

// idTemplate is the body of an -mcp row, formatted per request with its
// JSON-RPC id; "" for the other rows.
func (t *target) idTemplate() string {
	switch {
	case t.mode == nil:
		return ""
	case t.mode.stateless():
		return mcpStatelessTemplate
	}
	return mcpSessionTemplate
}

// bareRow is the name of the bare-proxy row t is compared with.
func (t *target) bareRow() string {
	if t.bare != "" {
		return t.bare
	}
	return "bare proxy"
}

func (s *stack) targets(o *options) []*target {
	tg := s.url["toolgate"]
	all := []*target{
		{name: "direct", ref: "direct", url: s.url["direct"] + "/tools/read_file", body: readBody, expect: 200, procs: []*proc{s.upstream}, reaches: true},
		{name: "bare proxy", ref: "direct", url: s.url["bare"] + "/tools/read_file", body: readBody, expect: 200, procs: []*proc{s.bare}, reaches: true},
		{name: "toolgate allow", ref: "direct", url: tg + "/tools/read_file", body: readBody, expect: 200, procs: []*proc{s.tgMemory}, reaches: true},
		{name: "ext-OPA", ref: "direct", url: s.url["extopa"] + "/tools/read_file", body: readBody, expect: 200, procs: []*proc{s.extProxy, s.opa}, parts: []string{"proxy", "OPA"}, reaches: true},
		{name: "toolgate deny", ref: "direct", url: tg + "/tools/delete_file", body: deleteBody, expect: 403, procs: []*proc{s.tgMemory}},
		{name: "bare ask", ref: "direct", url: s.url["bareask"] + "/tools/write_note", unique: true, expect: 200, procs: []*proc{s.bareAsk}, reaches: true},
		{name: "toolgate ask (memory)", ref: "direct", url: s.url["toolgate-ask"] + "/tools/write_note", unique: true, expect: 200, procs: []*proc{s.tgAsk}, reaches: true},
	}
	if s.tgBase != nil {
		all = append(all,
			&target{name: "baseline allow", ref: "direct", url: s.url["baseline"] + "/tools/read_file", body: readBody, expect: 200, procs: []*proc{s.tgBase}, reaches: true},
			&target{name: "baseline ask (memory)", ref: "direct", url: s.url["baseline-ask"] + "/tools/write_note", unique: true, expect: 200, procs: []*proc{s.tgBaseAsk}, reaches: true})
	}
	if s.bareAskRedis != nil {
		all = append(all, &target{name: "bare ask (Redis)", ref: "direct", url: s.url["bareask-redis"] + "/tools/write_note", unique: true, expect: 200, procs: []*proc{s.bareAskRedis}, reaches: true, redis: true})
	}
	if s.tgRedis != nil {
		all = append(all, &target{name: "toolgate ask (Redis)", ref: "direct", url: s.url["toolgate-redis"] + "/tools/write_note", unique: true, expect: 200, procs: []*proc{s.tgRedis}, reaches: true, redis: true})
	}
	all = append(all,
		&target{name: "MCP direct", ref: "MCP direct", url: s.url["direct"] + "/mcp", body: mcpBody, mcp: true, expect: 200, procs: []*proc{s.upstream}, reaches: true},
		&target{name: "MCP toolgate", ref: "MCP direct", url: tg + "/mcp-up/mcp", body: mcpBody, mcp: true, expect: 200, procs: []*proc{s.tgMemory}, reaches: true},
	)
	return pick(o, all)
}

// pick keeps the targets -only names (all without -only).
func pick(o *options, all []*target) []*target {
	if o.only == "" {
		return all
	}
	var picked []*target
	for _, t := range all {
		for w := range strings.SplitSeq(o.only, ",") {
			if strings.EqualFold(strings.TrimSpace(w), t.name) {
				picked = append(picked, t)
			}
		}
	}
	return picked
}

// headers are the request headers of every call to t.
func (t *target) headers(agentKey string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", "Bearer "+agentKey)
	if t.mcp || t.mode != nil {
		h.Set("Accept", "application/json, text/event-stream")
	}
	if t.mode != nil {
		h.Set("Mcp-Protocol-Version", t.mode.version)
		if t.mode.stateless() {
			h.Set("Mcp-Method", "tools/call")
			h.Set("Mcp-Name", "write_note")
		}
	}
	return h
}

// upstreamCount is how many calls the recording upstream received.
func (s *stack) upstreamCount() (int64, error) {
	res, err := http.Get(s.url["direct"] + "/_bench/count")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var c struct{ Count int64 }
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
		return 0, fmt.Errorf("upstream count: %w", err)
	}
	return c.Count, nil
}
