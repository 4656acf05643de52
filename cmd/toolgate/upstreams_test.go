package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/proxy"
)

// TestProxyUpstreams: every key of an upstream reaches the proxy, the
// hardening keys (tool_query, target_fold, strip_headers) included.
func TestProxyUpstreams(t *testing.T) {
	cfg := config.Config{Upstreams: []config.Upstream{
		{Name: "notes", URL: "http://127.0.0.1:9001"},
		{
			Name: "fs", URL: "http://127.0.0.1:9002/base", Protocol: "mcp", Prefix: "/fs/", MCPPath: "/rpc",
			TargetArgs: []string{"path"}, Timeout: config.Duration(5 * time.Second),
			ToolQuery: true, TargetFold: "windows", StripHeaders: []string{"x-internal-user"},
		},
	}}
	cfg.ApplyDefaults()
	got, err := proxyUpstreams(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []proxy.Upstream{
		{
			Name: "notes", Protocol: "rest", Prefix: "/", MCPPath: "/mcp", TargetArgs: config.DefaultTargetArgs,
			Timeout: time.Minute, TargetFold: "none",
		},
		{
			Name: "fs", Protocol: "mcp", Prefix: "/fs/", MCPPath: "/rpc", TargetArgs: []string{"path"}, Timeout: 5 * time.Second,
			ToolQuery: true, TargetFold: "windows", StripHeaders: []string{"X-Internal-User"},
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(proxy.Upstream{}, "URL")); diff != "" {
		t.Errorf("proxyUpstreams (-want +got):\n%s", diff)
	}
	for i, u := range []string{"http://127.0.0.1:9001", "http://127.0.0.1:9002/base"} {
		if got[i].URL == nil || got[i].URL.String() != u {
			t.Errorf("upstream %d: URL %v, want %s", i, got[i].URL, u)
		}
	}
}
