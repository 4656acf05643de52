package main

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestApproverQuorum: a call that takes two approvals of dba waits after
// the first (status endpoint, API and audit say so), counts an approver's
// repeated approval once, and executes once when a second approver
// approves. On another such call the first eligible rejection rejects,
// although one approval is in.
func TestApproverQuorum(t *testing.T) {
	e := startApprovers(t, approverSetup{approvals: trustedHeaderIdentity})
	dba1 := signedIn("dba1@example.com", "dba")

	p := e.park(t, "agent-key-0123456789", "drop_table", "users")
	for range 2 { // the second is the same approver again
		if code, body := postForm(t, p.link, decideForm(p.token, "approve"), dba1.header()); code != 200 {
			t.Fatalf("approve as dba1: %d\n%s", code, body)
		}
		c := getAPICall(t, e.approvals, p.id)
		if c.Status != "waiting" || !slices.Equal(c.approvers(), []string{"dba1@example.com"}) || c.Progress != "1 of 2 approvals" {
			t.Fatalf("after dba1's approval the API shows %s, approvals %v, progress %q; want waiting, [dba1@example.com], \"1 of 2 approvals\"",
				c.Status, c.approvers(), c.Progress)
		}
		st := callStatus(t, e.proxy, p.id, "agent-key-0123456789")
		approvals, _ := st["approvals"].([]any)
		if st["status"] != "waiting" || len(approvals) != 1 || fmt.Sprint(st["approvals_needed"]) != "[2]" {
			t.Fatalf("after dba1's approval the agent's status shows %v", st)
		}
		if first, _ := approvals[0].(map[string]any); first["by"] != "dba1@example.com" {
			t.Fatalf("approvals on the status endpoint: %v", approvals)
		}
		p.stillHeld(t)
	}
	if a := audits(t, e.replica, p.id, 1)[0]; a["partial"] != true || a["progress"] != "1 of 2 approvals" {
		t.Errorf("audit event of the first approval: %v", a)
	}
	// Somebody outside dba adds nothing.
	if code, _ := postForm(t, p.link, decideForm(p.token, "approve"), signedIn("dave@example.com", "dev").header()); code != http.StatusForbidden {
		t.Errorf("approve as dave (dev): %d, want 403", code)
	}
	if n := e.executed("users"); n != 0 {
		t.Fatalf("the upstream received a call with one of two approvals %d times", n)
	}

	// bob is in dba through approvals.approvers and approves by API key.
	code, ans := decideAs(t, e.approvals, p.id, "bob-key-0123456789", "approve")
	if code != 200 || ans.Status != "approved" || ans.DecidedBy != "bob@example.com" {
		t.Fatalf("approve as bob: %d %+v", code, ans)
	}
	if a := p.wait(t); a.code != 200 || a.body != `{"ok":true}` {
		t.Fatalf("the agent after two approvals: %d %s", a.code, a.body)
	}
	if n := e.executed("users"); n != 1 {
		t.Fatalf("the upstream received the call %d times, want 1", n)
	}
	if c := getAPICall(t, e.approvals, p.id); !slices.Equal(c.approvers(), []string{"dba1@example.com", "bob@example.com"}) || c.DecidedBy != "bob@example.com" {
		t.Errorf("the API shows approvals %v, decided by %q", c.approvers(), c.DecidedBy)
	}
	if a := audits(t, e.replica, p.id, 2)[1]; a["partial"] != false || a["decided_by"] != "bob@example.com" || a["via"] != "api" {
		t.Errorf("audit event of the second approval: %v", a)
	}

	// One approval in, then a rejection by an eligible approver.
	q := e.park(t, "agent-key-0123456789", "drop_table", "orders")
	if code, _ := postForm(t, q.link, decideForm(q.token, "approve"), dba1.header()); code != 200 {
		t.Fatalf("approve as dba1: %d", code)
	}
	// An ineligible rejection changes nothing.
	if code, _ := postForm(t, q.link, decideForm(q.token, "reject"), signedIn("dave@example.com", "dev").header()); code != http.StatusForbidden {
		t.Errorf("reject as dave (dev): %d, want 403", code)
	}
	if s := e.state(t, q.id); s != "waiting" {
		t.Fatalf("after an ineligible rejection the call is %s", s)
	}
	if code, body := postForm(t, q.link, decideForm(q.token, "reject"), signedIn("dba2@example.com", "dba").header()); code != 200 {
		t.Fatalf("reject as dba2: %d\n%s", code, body)
	}
	if a := q.wait(t); a.code != http.StatusForbidden || a.decision != "rejected" {
		t.Errorf("the agent after the rejection: %d %q %s", a.code, a.decision, a.body)
	}
	if c := getAPICall(t, e.approvals, q.id); c.Status != "rejected" || c.DecidedBy != "dba2@example.com" {
		t.Errorf("the call is %s, decided by %q; want rejected by dba2@example.com", c.Status, c.DecidedBy)
	}
	if n := e.executed("orders"); n != 0 {
		t.Errorf("the upstream received a rejected call %d times", n)
	}
}

// TestApproverQuorumTwoReplicas: two replicas on one Redis; for each of
// several quorum-2 calls, two approvers approve at the same moment, one on
// each replica's approvals API. Both approvals count, the call is approved
// and the upstream receives it exactly once.
func TestApproverQuorumTwoReplicas(t *testing.T) {
	redisAddr := testRedis(t)
	up := testkit.NewUpstream(t, nil)
	ev := newEvents(t)
	rules := `rules:
  - {id: two, effect: ask, tool: drop_table, target: "*", approvers: {subjects: [alice@example.com, bob@example.com], min: 2}}
`
	cfg := writeApproverConfig(t, up.URL, ev.URL, approverSetup{
		pending: redisPending(redisAddr),
		rules:   rules,
	})
	reps := []replica{startReplica(t, cfg), startReplica(t, cfg)}
	e := approverEnv{up: up, ev: ev}

	const rounds = 10
	for i := range rounds {
		holder := reps[i%2] // the agent waits on each replica in turn
		target := fmt.Sprintf("t%d", i)
		p := parkOn(t, holder.proxy, holder.approvals, ev, "agent-key-0123456789", "drop_table", target)

		type result struct {
			code int
			ans  apiCall
			err  error
		}
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			results [2]result
		)
		for j, key := range []string{"alice-key-0123456789", "bob-key-0123456789"} {
			wg.Go(func() {
				<-start
				code, ans, err := tryDecide(reps[j].approvals, p.id, key, "approve")
				results[j] = result{code, ans, err}
			})
		}
		close(start)
		wg.Wait()
		for j, r := range results {
			if r.err != nil || r.code != 200 {
				t.Fatalf("round %d: approval on replica %d: %d %+v %v", i, j, r.code, r.ans, r.err)
			}
		}
		// Exactly one of the two answers saw the call complete.
		if s := []string{results[0].ans.Status, results[1].ans.Status}; !slices.Contains(s, "approved") || !slices.Contains(s, "waiting") {
			t.Errorf("round %d: the two approvals were answered %v, want one waiting and one approved", i, s)
		}
		select {
		case a := <-p.answer:
			if a.code != 200 || a.id != p.id {
				t.Fatalf("round %d: the agent got %d %s", i, a.code, a.body)
			}
		case <-time.After(8 * time.Second):
			c := getAPICall(t, reps[1].approvals, p.id)
			t.Fatalf("round %d: the agent got no answer; the call is %s with approvals %v", i, c.Status, c.approvers())
		}
		c := getAPICall(t, reps[(i+1)%2].approvals, p.id)
		got := c.approvers()
		slices.Sort(got)
		if !slices.Equal(got, []string{"alice@example.com", "bob@example.com"}) {
			t.Errorf("round %d: approvals %v, want alice and bob once each", i, c.approvers())
		}
		if n := e.executed(target); n != 1 {
			t.Errorf("round %d: the upstream received the call %d times, want 1", i, n)
		}
	}
	if n := len(up.Requests()); n != rounds {
		t.Errorf("the upstream received %d requests for %d calls", n, rounds)
	}
}
