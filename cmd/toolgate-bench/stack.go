package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// stack is every server of the comparison, started on loopback.
type stack struct {
	dir        string
	agentKey   string
	serversCPU string // the core the servers are pinned to; "": all
	upstream   *proc
	bare       *proc
	extProxy   *proc
	opa        *proc
	approver   *proc
	bareAsk    *proc // the ask row's floor (bareask.go)
	// bareAskRedis is the Redis ask row's floor; nil without Redis
	bareAskRedis *proc
	tgMemory     *proc // toolgate for allow, deny and MCP
	// tgAsk is toolgate for ask with parked calls in memory, apart: they
	// stay there for result_ttl and would grow the heap the allow rows
	// are measured with.
	tgAsk   *proc
	tgRedis *proc // toolgate for ask, parked calls in Redis; nil without Redis
	// tgBase and tgBaseAsk are -baseline's toolgate for allow and for
	// ask; nil without -baseline.
	tgBase, tgBaseAsk *proc
	// rdb reads the Redis of the Redis rows (rediscost.go); nil without
	// Redis.
	rdb *redis.Client
	url map[string]string
}

func secret() string {
	b := make([]byte, 36)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// buildToolgate builds toolgate from the module this harness belongs to.
func buildToolgate(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m (run toolgate-bench inside the toolgate module, or pass -toolgate): %w", err)
	}
	bin := filepath.Join(dir, "toolgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/toolgate")
	cmd.Dir = strings.TrimSpace(string(out))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/toolgate: %w", err)
	}
	return bin, nil
}

// toolgateConfig is a serve configuration: the recording upstream as a
// REST upstream at / and as an MCP upstream at /mcp-up/, the rules table,
// an API key for the agent and one approver notified by CloudEvents.
func toolgateConfig(s *stack, store, redisAddr, proxyAddr, approvalsAddr, adminAddr, notifyURL string) string {
	pending := "pending: {store: memory}"
	if store == "redis" {
		pending = fmt.Sprintf("pending: {store: redis, redis_url: \"redis://%s/0\", redis_prefix: \"toolgate-bench-%s:\"}", redisAddr, secret()[:8])
	}
	return fmt.Sprintf(`listen: {proxy: %q, approvals: %q, admin: %q}
upstreams:
  - {name: tools, url: %q, protocol: rest, prefix: /}
  - {name: mcptools, url: %q, protocol: mcp, prefix: /mcp-up/, mcp_path: /mcp}
identity:
  api_keys: [{key: "${BENCH_AGENT_KEY}", subject: agent-bench, groups: [agents]}]
policy: {rules_file: ./rules.yaml, watch: false}
%s
approvals:
  secret: "${BENCH_APPROVALS_SECRET}"
  approvers: [{name: bench-approver, key: "${BENCH_APPROVER_KEY}"}]
  notify: [{url: %q, format: cloudevents}]
log: {level: info}
`, proxyAddr, approvalsAddr, adminAddr, s.url["direct"], s.url["direct"], pending, notifyURL)
}

// startStack starts the servers pinned to the servers' core and waits
// until each answers.
func startStack(ctx context.Context, o *options, pin pinning) (*stack, error) {
	s := &stack{dir: o.dir, agentKey: secret(), serversCPU: pin.servers, url: map[string]string{}}
	approverKey := secret()
	addrs, err := namedPorts("upstream", "bare", "extopa", "opa", "approver", "bareask", "bareask-redis", "tg-proxy", "tg-approvals", "tg-admin", "tga-proxy", "tga-approvals", "tga-admin", "tgr-proxy", "tgr-approvals", "tgr-admin",
		"tgb-proxy", "tgb-approvals", "tgb-admin", "tgba-proxy", "tgba-approvals", "tgba-admin")
	if err != nil {
		return nil, err
	}
	s.url["direct"] = "http://" + addrs["upstream"]
	if s.upstream, err = startProc(o.dir, "upstream", pin.servers, self("upstream", "-listen", addrs["upstream"]), nil); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.upstream, s.url["direct"]+"/_bench/count", 10*time.Second); err != nil {
		return nil, err
	}
	s.url["bare"] = "http://" + addrs["bare"]
	if s.bare, err = startProc(o.dir, "bare", pin.servers, self("bare", "-listen", addrs["bare"], "-upstream", s.url["direct"]), nil); err != nil {
		return nil, err
	}

	if err := s.startExtOPA(o, pin, addrs); err != nil {
		return nil, err
	}

	// The approver is the human's side, not the server's: it runs beside
	// the load generator.
	if s.approver, err = startProc(o.dir, "approver", pin.load, self("approver", "-listen", addrs["approver"]),
		[]string{"BENCH_APPROVER_KEY=" + approverKey}); err != nil {
		return nil, err
	}
	s.url["bareask"] = "http://" + addrs["bareask"]
	if s.bareAsk, err = startProc(o.dir, "bareask", pin.servers, self("bareask", "-listen", addrs["bareask"], "-upstream", s.url["direct"],
		"-notify", "http://"+addrs["approver"]+"/bareask"), []string{"BENCH_APPROVER_KEY=" + approverKey}); err != nil {
		return nil, err
	}
	if err := writeRules(filepath.Join(o.dir, "rules.yaml"), o.rules); err != nil {
		return nil, err
	}
	env := []string{"BENCH_AGENT_KEY=" + s.agentKey, "BENCH_APPROVER_KEY=" + approverKey, "BENCH_APPROVALS_SECRET=" + secret()}
	startToolgate := func(bin, name, store, p string) (*proc, error) {
		cfg := filepath.Join(o.dir, name+".yaml")
		notifyURL := "http://" + addrs["approver"] + "/" + name
		if err := os.WriteFile(cfg, []byte(toolgateConfig(s, store, o.redis, addrs[p+"-proxy"], addrs[p+"-approvals"], addrs[p+"-admin"], notifyURL)), 0o600); err != nil {
			return nil, err
		}
		tg, err := startProc(o.dir, name, pin.servers, []string{bin, "serve", "--config", cfg}, env)
		if err != nil {
			return nil, err
		}
		return tg, waitReady(ctx, tg, "http://"+addrs[p+"-admin"]+"/readyz", 30*time.Second)
	}
	startTG := func(name, store, p string) (*proc, error) { return startToolgate(o.toolgate, name, store, p) }
	if s.tgMemory, err = startTG("toolgate", "memory", "tg"); err != nil {
		return nil, err
	}
	s.url["toolgate"] = "http://" + addrs["tg-proxy"]
	if s.tgAsk, err = startTG("toolgate-ask", "memory", "tga"); err != nil {
		return nil, err
	}
	s.url["toolgate-ask"] = "http://" + addrs["tga-proxy"]
	if o.baseline != "" {
		if s.tgBase, err = startToolgate(o.baseline, "baseline", "memory", "tgb"); err != nil {
			return nil, err
		}
		if s.tgBaseAsk, err = startToolgate(o.baseline, "baseline-ask", "memory", "tgba"); err != nil {
			return nil, err
		}
		s.url["baseline"], s.url["baseline-ask"] = "http://"+addrs["tgb-proxy"], "http://"+addrs["tgba-proxy"]
	}
	if o.redis != "" {
		if s.tgRedis, err = startTG("toolgate-redis", "redis", "tgr"); err != nil {
			return nil, err
		}
		s.url["toolgate-redis"] = "http://" + addrs["tgr-proxy"]
		s.rdb = redis.NewClient(&redis.Options{Addr: o.redis})
		s.url["bareask-redis"] = "http://" + addrs["bareask-redis"]
		if s.bareAskRedis, err = startProc(o.dir, "bareask-redis", pin.servers, self("bareask", "-listen", addrs["bareask-redis"], "-upstream", s.url["direct"],
			"-notify", "http://"+addrs["approver"]+"/bareask-redis", "-redis", o.redis), []string{"BENCH_APPROVER_KEY=" + approverKey}); err != nil {
			return nil, err
		}
		if err := waitReady(ctx, s.bareAskRedis, s.url["bareask-redis"]+"/_bench/ready", 30*time.Second); err != nil {
			return nil, err
		}
	}
	for _, w := range []struct {
		p   *proc
		url string
	}{{s.bare, s.url["bare"] + "/_bench/count"}, {s.opa, "http://" + addrs["opa"] + "/health"}, {s.extProxy, s.url["extopa"] + "/_bench/count"}, {s.approver, "http://" + addrs["approver"] + "/_bench/failures"}, {s.bareAsk, s.url["bareask"] + "/_bench/ready"}} {
		if err := waitReady(ctx, w.p, w.url, 30*time.Second); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startExtOPA starts the external-OPA setup: an OPA server and the Go
// proxy that asks it for every call.
func (s *stack) startExtOPA(o *options, pin pinning, addrs map[string]string) (err error) {
	// The external OPA server is toolgate's embedded OPA command line,
	// so it runs exactly the OPA version toolgate decides with.
	opaDir := filepath.Join(o.dir, "opa")
	if err := os.MkdirAll(opaDir, 0o700); err != nil {
		return err
	}
	if err := writeExtOPA(opaDir, o.rules); err != nil {
		return err
	}
	if s.opa, err = startProc(o.dir, "opa", pin.servers, []string{o.toolgate, "opa", "run", "--server", "--addr", addrs["opa"], "--log-level", "error", opaDir}, nil); err != nil {
		return err
	}
	s.url["extopa"] = "http://" + addrs["extopa"]
	if s.extProxy, err = startProc(o.dir, "extopa-proxy", pin.servers, self("extopa", "-listen", addrs["extopa"], "-upstream", s.url["direct"],
		"-opa", "http://"+addrs["opa"]+"/v1/data/bench/decision"), nil); err != nil {
		return err
	}
	return nil
}
