package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolgate/toolgate/internal/testkit"
)

// secretMark is in the subject, the tool names and every argument of the
// metrics test's traffic: no label value may contain it.
const secretMark = "zq7"

func metricsConfig(upstream, notifyURL, hookURL string) string {
	return `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams:
  - {name: files, url: ` + upstream + `}
identity:
  api_keys: [{key: agent-key-0123456789, subject: ` + secretMark + `-subject}]
policy:
  dir: ./policy
  rules_file: ./rules.yaml
pending:
  hold: 4s
  ttl: 4s
approvals:
  secret: ` + testSecret + `
  approvers: [{name: alice, key: alice-key-0123456789}]
  notify: [{url: ` + notifyURL + `, format: cloudevents}]
hooks: [{name: h1, url: ` + hookURL + `, match: {tool: zq7_read}}]
shutdown_grace: 2s
`
}

const metricsRules = `rules:
  - {id: r1, effect: allow, tool: zq7_read, target: "*"}
  - {id: r2, effect: deny, tool: zq7_read, target: zq7-secrets.txt}
  - {id: r3, effect: ask, tool: zq7_write, target: "*"}
`

// TestMetrics sends known traffic through a running toolgate and checks
// the value of every toolgate_* series, that no label value carries a
// subject, tool name, argument or call ID, and that the README's metric
// table and the registry agree.
func TestMetrics(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	ev := newEvents(t)
	// The hook has no opinion: the decisions are the rules', and every
	// zq7_read call is one hook request.
	var hookCalls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hookCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decision":"none"}`)
	}))
	t.Cleanup(hook.Close)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": metricsConfig(up.URL, ev.URL, hook.URL),
		"rules.yaml":    metricsRules,
		"policy/p.rego": "package toolgate\n\ndeny contains {\"id\": \"never\", \"message\": \"never\"} if input.tool.name == \"never\"\n",
	})
	tg := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	var callIDs []string
	call := func(tool, body string, want int, header ...string) string {
		t.Helper()
		res, got := agentCall(t, tg.proxy, tool, body, header...)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", tool, body, res.StatusCode, got, want)
		}
		id := res.Header.Get("X-Toolgate-Call-Id")
		callIDs = append(callIDs, id)
		return id
	}

	for range 3 {
		call("zq7_read", `{"path":"zq7-a.txt"}`, 200)
	}
	for range 2 {
		call("zq7_read", `{"path":"zq7-secrets.txt"}`, 403)
	}
	call("zq7_read", `{"path":"zq7-`, 400) // not JSON: refused before any decision

	// Asked, then approved through the approvals API while the agent is
	// held; the gauges are read while it waits.
	held := holdCall(t, tg, `{"path":"zq7-note.txt","content":"zq7-yes"}`)
	id := waitingCall(t, tg.approvals)
	callIDs = append(callIDs, id)
	mid := scrape(t, tg.admin)
	for name, want := range map[string]float64{"toolgate_calls_held": 1, "toolgate_calls_waiting": 1, "toolgate_calls_parked_total": 1} {
		if got := value(t, mid, name); got != want {
			t.Errorf("%s while a call is held: %v, want %v", name, got, want)
		}
	}
	if code := decideAPI(t, tg.approvals, id, "approve"); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	if res := <-held; res.StatusCode != 200 {
		t.Fatalf("approved call: %d, want 200", res.StatusCode)
	}

	// Asked, then rejected.
	held = holdCall(t, tg, `{"path":"zq7-note.txt","content":"zq7-no"}`)
	id = waitingCall(t, tg.approvals)
	callIDs = append(callIDs, id)
	if code := decideAPI(t, tg.approvals, id, "reject"); code != 200 {
		t.Fatalf("reject: %d", code)
	}
	if res := <-held; res.StatusCode != 403 || res.Header.Get("X-Toolgate-Decision") != "rejected" {
		t.Fatalf("rejected call: %d %q", res.StatusCode, res.Header.Get("X-Toolgate-Decision"))
	}

	// Asked, then cancelled by the agent.
	id = call("zq7_write", `{"path":"zq7-c.txt","content":"zq7"}`, 202, "Prefer", "respond-async")
	// Once announced: a call cancelled before its event went out is
	// announced to nobody (skipped), and this test counts deliveries.
	ev.approvalURL(t, id)
	req, _ := http.NewRequest("DELETE", tg.proxy+"/_toolgate/calls/"+id, nil)
	req.Header.Set("Authorization", "Bearer agent-key-0123456789")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("cancel: %d", res.StatusCode)
	}

	// Asked, then left to expire (ttl 4s).
	call("zq7_write", `{"path":"zq7-e.txt","content":"zq7"}`, 202, "Prefer", "respond-async")
	eventually(t, tg.admin, "toolgate_approvals_total", 1, "outcome", "expired")
	// Four parked calls: four requested and four resolved events.
	eventually(t, tg.admin, "toolgate_notifications_total", 8, "format", "cloudevents", "result", "delivered")
	if n := len(ev.got(t)); n != 8 {
		t.Errorf("the notification receiver got %d events, want 8", n)
	}

	// A policy change reloads; a broken one fails and keeps the revision.
	rev := readyRevision(t, tg.admin)
	if got := revisionInfo(t, scrape(t, tg.admin)); got != rev {
		t.Fatalf("toolgate_policy_revision_info revision %q, /readyz says %q", got, rev)
	}
	writeFiles(t, dir, map[string]string{"policy/q.rego": "package toolgate\n\ndeny contains {\"id\": \"q\", \"message\": \"q\"} if input.tool.name == \"q\"\n"})
	eventually(t, tg.admin, "toolgate_policy_reloads_total", 1, "result", "success")
	newRev := readyRevision(t, tg.admin)
	if newRev == rev {
		t.Fatalf("the policy revision did not change on reload: %q", rev)
	}
	if got := revisionInfo(t, scrape(t, tg.admin)); got != newRev {
		t.Fatalf("toolgate_policy_revision_info after reload: %q, /readyz says %q", got, newRev)
	}
	writeFiles(t, dir, map[string]string{"policy/q.rego": "package toolgate\n\ndeny contains {\n"})
	eventually(t, tg.admin, "toolgate_policy_reloads_total", 1, "result", "failure")

	fams := scrape(t, tg.admin)
	if got := revisionInfo(t, fams); got != newRev {
		t.Errorf("toolgate_policy_revision_info after a failed reload: %q, want %q (the last good policy)", got, newRev)
	}
	checkBuildInfo(t, fams)
	want := map[string]map[string]float64{
		// Every action and kind of an upstream is exported from the start.
		"toolgate_decisions_total": {
			"action=allow,kind=rest,upstream=files": 3,
			"action=deny,kind=rest,upstream=files":  2,
			"action=ask,kind=rest,upstream=files":   4,
			"action=allow,kind=mcp,upstream=files":  0, "action=deny,kind=mcp,upstream=files": 0, "action=ask,kind=mcp,upstream=files": 0,
			"action=allow,kind=http,upstream=files": 0, "action=deny,kind=http,upstream=files": 0, "action=ask,kind=http,upstream=files": 0,
		},
		"toolgate_decision_duration_seconds":         {"": 9},
		"toolgate_upstream_request_duration_seconds": {"code=200,upstream=files": 4},
		"toolgate_requests_refused_total":            {"outcome=invalid": 1, "outcome=unauthenticated": 0, "outcome=unavailable": 0},
		"toolgate_calls_parked_total":                {"": 4},
		"toolgate_calls_held":                        {"": 0},
		"toolgate_requests_not_held_total":           {"": 0},
		"toolgate_calls_not_forwarded_total":         {"": 0},
		"toolgate_approved_calls_seal_broken_total":  {"": 0},
		"toolgate_grants_seal_broken_total":          {"": 0},
		"toolgate_calls_waiting":                     {"": 0},
		"toolgate_approved_calls_executed_total":     {"": 1},
		"toolgate_approvals_total": {
			"outcome=approved": 1, "outcome=rejected": 1, "outcome=cancelled": 1, "outcome=expired": 1, "outcome=unknown": 0,
		},
		"toolgate_approval_wait_seconds": {"": 2},
		"toolgate_dry_run_calls_total": {
			"action=allow,upstream=files": 0, "action=ask,upstream=files": 0, "action=deny,upstream=files": 0,
		},
		// The memory store shares no listings: nothing fails to be written.
		"toolgate_listings_not_shared_total": {"upstream=files": 0},
		"toolgate_approval_decisions_total": func() map[string]float64 {
			// Every way of deciding is there from the start, at zero.
			m := map[string]float64{}
			for _, via := range []string{"link", "api", "header", "oidc", "slack", "requester"} {
				m["decision=approved,partial=false,via="+via] = 0
				m["decision=approved,partial=true,via="+via] = 0
				m["decision=rejected,partial=false,via="+via] = 0
			}
			m["decision=approved,partial=false,via=api"], m["decision=rejected,partial=false,via=api"] = 1, 1
			return m
		}(),
		"toolgate_notifications_total": {
			"format=cloudevents,result=delivered": 8, "format=cloudevents,result=retry": 0,
			"format=cloudevents,result=failed": 0, "format=cloudevents,result=dropped": 0, "format=cloudevents,result=skipped": 0,
			// Formats not configured are there at zero too.
			"format=slack,result=delivered": 0, "format=slack,result=retry": 0,
			"format=slack,result=failed": 0, "format=slack,result=dropped": 0, "format=slack,result=skipped": 0,
			"format=teams,result=delivered": 0, "format=teams,result=retry": 0,
			"format=teams,result=failed": 0, "format=teams,result=dropped": 0, "format=teams,result=skipped": 0,
		},
		"toolgate_notifications_reannounced_total": {"event=requested": 0, "event=resolved": 0},
		"toolgate_redis_unsafe_settings":           {"": 0}, // the memory store has none
		"toolgate_policy_reloads_total":            {"result=success": 1, "result=failure": 1},
		// The console decision log loses nothing; there is no log service.
		"toolgate_decision_log_events_dropped_total": {
			"reason=queue_full": 0, "reason=rate_limit": 0, "reason=buffer_full": 0, "reason=encoding": 0, "reason=error": 0,
		},
		"toolgate_decision_log_uploads_total": {"result=success": 0, "result=failure": 0},
		"toolgate_connections_limit":          {"listener=proxy": 10000, "listener=approvals": 10000, "listener=admin": 64},
		"toolgate_connections_shed_total":     {"listener=proxy": 0, "listener=approvals": 0, "listener=admin": 0},
		"toolgate_connections_refused_total":  {"listener=proxy": 0, "listener=approvals": 0, "listener=admin": 0},
		// Every outcome of a hook is there from the start.
		"toolgate_hook_calls_total": {
			"hook=h1,outcome=allow": 0, "hook=h1,outcome=ask": 0, "hook=h1,outcome=deny": 0,
			"hook=h1,outcome=none": float64(hookCalls.Load()), "hook=h1,outcome=failure": 0,
		},
		"toolgate_hook_duration_seconds": {"hook=h1": float64(hookCalls.Load())},
	}
	if hookCalls.Load() != 5 {
		t.Errorf("the hook was asked %d times, want 5 (every zq7_read call)", hookCalls.Load())
	}
	for name, series := range want {
		got := seriesOf(t, fams, name)
		if !maps.Equal(got, series) {
			t.Errorf("%s:\n got  %v\n want %v", name, got, series)
		}
	}
	for _, name := range []string{"toolgate_decision_duration_seconds", "toolgate_upstream_request_duration_seconds", "toolgate_approval_wait_seconds"} {
		if h := fams[name].GetMetric()[0].GetHistogram(); h.GetSampleSum() <= 0 {
			t.Errorf("%s: sum %v, want > 0", name, h.GetSampleSum())
		}
	}
	// How many connections are open depends on the clients' keep-alives,
	// but this scrape's own is one.
	open := seriesOf(t, fams, "toolgate_connections_open")
	if len(open) != 3 || open["listener=admin"] < 1 || open["listener=proxy"] < 0 || open["listener=approvals"] < 0 {
		t.Errorf("toolgate_connections_open: %v, want the three listeners, admin at least 1", open)
	}
	for name := range fams {
		if strings.HasPrefix(name, "toolgate_") && want[name] == nil && name != "toolgate_build_info" &&
			name != "toolgate_policy_revision_info" && name != "toolgate_connections_open" {
			t.Errorf("%s is exported but this test does not check its value", name)
		}
	}
	if n := len(up.Requests()); n != 4 {
		t.Errorf("the upstream got %d calls, want 4 (3 allowed, 1 approved)", n)
	}

	// No label value, in any family, carries what an agent sent.
	secrets := append([]string{secretMark, "agent-key-0123456789", "alice"}, callIDs...)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				for _, s := range secrets {
					if s != "" && strings.Contains(lp.GetValue(), s) {
						t.Errorf("%s{%s=%q} carries %q", name, lp.GetName(), lp.GetValue(), s)
					}
				}
			}
		}
	}

	checkReadmeTable(t, fams)
}

// holdCall sends an asked call and returns its answer once it comes.
func holdCall(t *testing.T, tg replica, body string) <-chan *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", tg.proxy+"/tools/zq7_write", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer agent-key-0123456789")
	done := make(chan *http.Response, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			res = &http.Response{StatusCode: -1, Header: http.Header{}}
		} else {
			res.Body.Close()
		}
		done <- res
	}()
	return done
}

// waitingCall is the one call the approvals API lists as waiting.
func waitingCall(t *testing.T, approvalsBase string) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		req, _ := http.NewRequest("GET", approvalsBase+"/api/approvals?status=waiting", nil)
		req.Header.Set("Authorization", "Bearer alice-key-0123456789")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Calls []struct {
				CallID string `json:"call_id"`
			} `json:"calls"`
		}
		err = json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
		if err != nil {
			t.Fatalf("approvals list: %v", err)
		}
		switch len(list.Calls) {
		case 0:
		case 1:
			return list.Calls[0].CallID
		default:
			t.Fatalf("%d calls waiting, want 1", len(list.Calls))
		}
	}
	t.Fatal("no call became waiting")
	return ""
}

// decideAPI approves or rejects a call through the approvals JSON API.
func decideAPI(t *testing.T, base, id, decision string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/approvals/"+id, strings.NewReader(`{"decision":"`+decision+`"}`))
	req.Header.Set("Authorization", "Bearer alice-key-0123456789")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func scrape(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// seriesOf maps each series of a family ("k=v,k=v", sorted; "" without
// labels) to its value: a counter's or gauge's value, a histogram's count.
func seriesOf(t *testing.T, fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Errorf("%s is not exported", name)
		return nil
	}
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var kv []string
		for _, lp := range m.GetLabel() {
			kv = append(kv, lp.GetName()+"="+lp.GetValue())
		}
		slices.Sort(kv)
		var v float64
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.GetHistogram().GetSampleCount())
		default:
			t.Errorf("%s: unexpected type %v", name, f.GetType())
		}
		out[strings.Join(kv, ",")] = v
	}
	return out
}

// value is the value of a family's one series with the given labels.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	var kv []string
	for i := 0; i+1 < len(labels); i += 2 {
		kv = append(kv, labels[i]+"="+labels[i+1])
	}
	slices.Sort(kv)
	v, ok := seriesOf(t, fams, name)[strings.Join(kv, ",")]
	if !ok {
		t.Errorf("%s has no series %v", name, kv)
	}
	return v
}

// eventually waits until a series reaches want (counters only grow, so a
// value above want fails at once).
func eventually(t *testing.T, admin, name string, want float64, labels ...string) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got = value(t, scrape(t, admin), name, labels...)
		if got > want {
			break
		}
		if got == want {
			return
		}
	}
	t.Fatalf("%s%v: %v, want %v", name, labels, got, want)
}

// settles waits until a gauge reads want, whichever way it has to move.
func settles(t *testing.T, admin, name string, want float64, labels ...string) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = value(t, scrape(t, admin), name, labels...); got == want {
			return
		}
	}
	t.Fatalf("%s%v: %v, want %v", name, labels, got, want)
}

func readyRevision(t *testing.T, admin string) string {
	t.Helper()
	res, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Checks struct {
			Policy struct {
				Revision string `json:"revision"`
			} `json:"policy"`
		} `json:"checks"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil || doc.Checks.Policy.Revision == "" {
		t.Fatalf("/readyz: %v %+v", err, doc)
	}
	return doc.Checks.Policy.Revision
}

// revisionInfo is the revision label of the one revision info series.
func revisionInfo(t *testing.T, fams map[string]*dto.MetricFamily) string {
	t.Helper()
	ms := fams["toolgate_policy_revision_info"].GetMetric()
	if len(ms) != 1 || ms[0].GetGauge().GetValue() != 1 || len(ms[0].GetLabel()) != 1 {
		t.Fatalf("toolgate_policy_revision_info: %v, want one series of value 1", ms)
	}
	return ms[0].GetLabel()[0].GetValue()
}

func checkBuildInfo(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	ms := fams["toolgate_build_info"].GetMetric()
	if len(ms) != 1 || ms[0].GetGauge().GetValue() != 1 {
		t.Fatalf("toolgate_build_info: %v, want one series of value 1", ms)
	}
	labels := map[string]string{}
	for _, lp := range ms[0].GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	if labels["go_version"] != runtime.Version() || labels["opa_version"] == "" || labels["version"] != version || len(labels) != 4 {
		t.Errorf("toolgate_build_info labels %v", labels)
	}
}

// checkReadmeTable compares the README's metric table (name, type, labels)
// with the toolgate_* families the registry exports.
func checkReadmeTable(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	documented := map[string]string{} // name → "type labels"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`toolgate_") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var labels []string
		for l := range strings.SplitSeq(cells[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		documented[name] = strings.TrimSpace(cells[2]) + " " + fmt.Sprint(labels)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	exported := map[string]string{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "toolgate_") {
			continue
		}
		set := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				set[lp.GetName()] = true
			}
		}
		labels := slices.Sorted(maps.Keys(set))
		exported[name] = strings.ToLower(f.GetType().String()) + " " + fmt.Sprint(labels)
	}
	for name, doc := range documented {
		if exported[name] != doc {
			t.Errorf("README documents %s as %q, the registry exports %q", name, doc, exported[name])
		}
	}
	for name, exp := range exported {
		if _, ok := documented[name]; !ok {
			t.Errorf("%s (%s) is exported but not in the README's metric table", name, exp)
		}
	}
}
