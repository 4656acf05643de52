package proxy

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/policy"
)

// listFailDecider allows every call, and fails every list-phase decision
// as a policy with an error there (a conflict, or its timeout) does,
// after taking slow for it.
type listFailDecider struct {
	slow    time.Duration
	decided atomic.Int64 // list-phase decisions asked for
}

func (d *listFailDecider) Decide(_ context.Context, in *policy.Input) (policy.Decision, error) {
	if in.Phase != policy.PhaseList {
		return policy.Decision{Action: policy.Allow}, nil
	}
	d.decided.Add(1)
	time.Sleep(d.slow)
	return policy.Decision{Action: policy.Deny}, errors.New("policy: evaluating: p.rego:4: eval_conflict_error: rule data.toolgate.env produced conflicting values")
}

// listWithFailingPolicy lists tools through toolgate deciding with d, and
// returns what the client got and what toolgate logged.
func listWithFailingPolicy(t *testing.T, d Decider, tools []*mcp.Tool) ([]*mcp.Tool, string) {
	t.Helper()
	var logs testkit.Buffer
	era := mcpEras[0]
	env := &mcpEnv{up: newListUpstream(t, era.opts, tools)}
	env.url = newTestServer(t, d, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: env.up.url, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	}).url
	list, err := env.connect(t, era).ListTools(mcpCtx(t), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return list.Tools, logs.String()
}

// TestListPolicyErrorLogged: a policy error deciding a listed tool hides
// it (fail closed), and the log says so once for the list, with the
// error, however many entries failed.
func TestListPolicyErrorLogged(t *testing.T) {
	got, logs := listWithFailingPolicy(t, &listFailDecider{}, []*mcp.Tool{{Name: "read_file"}, {Name: "write_file"}, {Name: "list_dir"}})
	if len(got) != 0 {
		t.Fatalf("tools whose list decision failed were listed: %v", got)
	}
	if n := strings.Count(logs, "eval_conflict_error"); n != 1 {
		t.Fatalf("the list phase's policy error is logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, `"tool":"list_dir"`) { // the first listed: the server lists by name
		t.Errorf("the log does not name the tool:\n%s", logs)
	}
}

// TestListDecideTimeBound: decisions that each take long (a policy that
// times out) stop being asked for once the list's decisions have taken
// listDecideTime in all: the rest of the list is hidden undecided, and
// the log says why, instead of the list taking a timeout per tool.
func TestListDecideTimeBound(t *testing.T) {
	defer func(d time.Duration) { listDecideTime = d }(listDecideTime)
	listDecideTime = 250 * time.Millisecond
	tools := make([]*mcp.Tool, 20)
	for i := range tools {
		tools[i] = &mcp.Tool{Name: "tool" + itoa(i)}
	}
	d := &listFailDecider{slow: 100 * time.Millisecond}
	start := time.Now()
	got, logs := listWithFailingPolicy(t, d, tools)
	if len(got) != 0 {
		t.Fatalf("tools whose list decision failed were listed: %v", got)
	}
	if n := d.decided.Load(); n != 3 {
		t.Errorf("%d list decisions asked for, want 3 (the bound is past after the third)", n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the list took %v", took)
	}
	if !strings.Contains(logs, "took too long") {
		t.Errorf("the log does not say the list's decisions were cut:\n%s", logs)
	}
}
