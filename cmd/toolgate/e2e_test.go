package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/examples/notes"
	"github.com/toolgate/toolgate/internal/testkit"
)

// testRedis returns the Redis to test against: $TOOLGATE_TEST_REDIS_ADDR.
func testRedis(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		testkit.Unavailable(t, "TOOLGATE_TEST_REDIS_ADDR is not set: the Redis tests need a Redis")
	}
	return addr
}

// newNotes starts the example notes server behind a recording upstream.
func newNotes(t *testing.T) (*notes.Files, *testkit.Upstream) {
	files := notes.NewFiles()
	return files, testkit.NewUpstream(t, testkit.Handler(notes.NewHandler(files)))
}

// events receives CloudEvents notifications.
type events struct{ *testkit.Upstream }

func newEvents(t *testing.T) events { return events{testkit.NewUpstream(t, nil)} }

// got returns the notifications received so far, decoded.
func (e events) got(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range e.Requests() {
		var ev map[string]any
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			t.Fatalf("notification %q: %v", r.Body, err)
		}
		out = append(out, ev)
	}
	return out
}

// requested returns the data of the approval.requested events so far.
func (e events) requested(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range e.got(t) {
		if data, _ := ev["data"].(map[string]any); ev["type"] == "dev.toolgate.approval.requested" {
			out = append(out, data)
		}
	}
	return out
}

func (e events) approvalURL(t *testing.T, callID string) string {
	t.Helper()
	var data map[string]any
	testkit.WaitFor(t, "an approval.requested event for "+callID, func() bool {
		for _, d := range e.requested(t) {
			if d["call_id"] == callID {
				data = d
				return true
			}
		}
		return false
	})
	// Every call the end-to-end tests park names its target, and the
	// approver must see it.
	if target, _ := data["target"].(string); target == "" {
		t.Errorf("approval.requested for %s names no target: %v", callID, data)
	}
	return data["approval_url"].(string)
}

func e2eConfig(upstream, redisURL, prefix, notifyURL string) string {
	return `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams:
  - {name: notes, url: ` + upstream + `}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  rules_file: ./rules.yaml
pending:
  store: redis
  redis_url: ` + redisURL + `
  redis_prefix: "` + prefix + `"
  hold: 10s
approvals:
  secret: ` + testSecret + `
  approvers: [{name: alice, key: alice-key-0123456789}, {name: agent-42, key: self-key-0123456789}]
  notify: [{url: ` + notifyURL + `, format: cloudevents}]
shutdown_grace: 2s
`
}

const seedRulesYAML = `rules:
  - {id: r1, effect: allow, tool: read_file, target: "*"}
  - {id: r2, effect: deny,  tool: read_file, target: .env}
  - {id: r3, effect: ask,   tool: write_note, target: "*"}
`

type replica struct {
	*running
	approvals string
}

// startReplica runs one toolgate with the given config file.
func startReplica(t *testing.T, cfgFile string) replica {
	t.Helper()
	r := startServe(t, []string{"serve", "--config", cfgFile}, nil)
	var ap string
	for line := range strings.SplitSeq(r.stderr.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "toolgate listening" {
			ap = "http://" + rec["approvals"].(string)
		}
	}
	return replica{running: r, approvals: ap}
}

func agentCall(t *testing.T, base, tool, body string, header ...string) (*http.Response, string) {
	t.Helper()
	return agentPost(t, base+"/tools/"+tool, body, header...)
}

// agentPost POSTs body to url as the agent (JSON, its API key), with
// header's name, value pairs set, and returns the answer and its body.
func agentPost(t *testing.T, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer agent-key-0123456789")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// relink points an approval URL (built on public_url) at a replica.
func relink(t *testing.T, link, approvalsBase string) (string, string) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return approvalsBase + u.Path, u.Query().Get("token")
}

func newPrefix() string { return "tg-e2e-" + rand.Text()[:10] + ":" }

// TestSeedWalkthrough: Read readme → executed; Read .env → blocked;
// write_note → waiting, file unchanged → approved through the notified
// link → executed once, file changed. Three calls, two executions.
func TestSeedWalkthrough(t *testing.T) {
	redisAddr := testRedis(t)
	files, up := newNotes(t)
	ev := newEvents(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+redisAddr, newPrefix(), ev.URL),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	if res, body := agentCall(t, a.proxy, "read_file", `{"path":"README.md"}`); res.StatusCode != 200 {
		t.Fatalf("read README: %d %s", res.StatusCode, body)
	}
	if res, body := agentCall(t, a.proxy, "read_file", `{"path":".env"}`); res.StatusCode != 403 || !strings.Contains(body, `"r2"`) {
		t.Fatalf("read .env: %d %s", res.StatusCode, body)
	}
	res, body := agentCall(t, a.proxy, "write_note", `{"path":"notes/today.txt","content":"reviewed"}`, "Prefer", "respond-async")
	if res.StatusCode != 202 {
		t.Fatalf("write: %d %s", res.StatusCode, body)
	}
	id := res.Header.Get("X-Toolgate-Call-Id")
	if content, _ := files.Read("notes/today.txt"); content != "draft" {
		t.Fatalf("before approval the file is %q", content)
	}
	link, token := relink(t, ev.approvalURL(t, id), a.approvals)
	for range 3 { // link previewers and mail scanners
		if pg, err := http.Get(link + "?token=" + url.QueryEscape(token)); err != nil || pg.StatusCode != 200 {
			t.Fatalf("approval page: %v %v", pg, err)
		}
	}
	if content, _ := files.Read("notes/today.txt"); content != "draft" || len(up.Requests()) != 1 {
		t.Fatal("fetching the approval page changed something")
	}
	form, err := http.PostForm(link, url.Values{"token": {token}, "decision": {"approve"}, "comment": {"ok"}})
	if err != nil || form.StatusCode != 200 {
		t.Fatalf("approve: %v %v", form, err)
	}
	form.Body.Close()
	// Nobody holds the agent: the sweeper executes after its grace.
	var doc map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest("GET", a.proxy+"/_toolgate/calls/"+id+"?wait=2s", nil)
		req.Header.Set("Authorization", "Bearer agent-key-0123456789")
		st, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		doc = nil
		_ = json.NewDecoder(st.Body).Decode(&doc)
		st.Body.Close()
		if doc["status"] == "executed" {
			break
		}
	}
	if doc["status"] != "executed" || doc["decided_by"] != "link" {
		t.Fatalf("status %v", doc)
	}
	if content, _ := files.Read("notes/today.txt"); content != "reviewed" {
		t.Fatalf("after approval the file is %q", content)
	}
	if n := len(up.Requests()); n != 2 {
		t.Fatalf("the tool server saw %d requests, want 2 (readme, approved write)", n)
	}
}

// TestTwoReplicas: the agent is held on replica A, an approver approves
// on replica B's approvals API, A's agent gets the upstream's answer and
// the upstream sees one request. It also reports the latency from the
// approval's answer to the upstream receiving the call.
func TestTwoReplicas(t *testing.T) { twoReplicas(t, "redis://"+testRedis(t)) }

// TestTwoReplicasCluster is TestTwoReplicas on a three-primary Redis
// Cluster, where the calls spread over 16 shards (pending.redis_shards).
func TestTwoReplicasCluster(t *testing.T) {
	testRedis(t) // Redis tests run where Redis is available
	nodes := testkit.RedisCluster(t)
	twoReplicas(t, "redis+cluster://"+nodes[0]+"?addr="+nodes[1]+"&addr="+nodes[2])
}

func twoReplicas(t *testing.T, redisURL string) {
	_, up := newNotes(t)
	ev := newEvents(t)
	prefix := newPrefix()
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, redisURL, prefix, ev.URL),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	b := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	const rounds = 20
	var lat []time.Duration
	for i := range rounds {
		type answer struct {
			code int
			body string
			id   string
		}
		done := make(chan answer, 1)
		go func() {
			res, body := agentCall(t, a.proxy, "write_note", fmt.Sprintf(`{"path":"notes/r%d.txt","content":"x"}`, i))
			done <- answer{res.StatusCode, body, res.Header.Get("X-Toolgate-Call-Id")}
		}()
		// Find the parked call through B's API.
		id := waitingCall(t, b.approvals)
		if i == 0 {
			// Self-approval is refused.
			if code := approveAPI(t, b.approvals, id, "self-key-0123456789"); code != 403 {
				t.Fatalf("self-approval: %d, want 403", code)
			}
		}
		before := len(up.Requests())
		if code := approveAPI(t, b.approvals, id, "alice-key-0123456789"); code != 200 {
			t.Fatalf("approve on B: %d", code)
		}
		approvedAt := time.Now()
		got := <-done
		if got.code != 200 || !strings.Contains(got.body, `"bytes"`) || got.id != id {
			t.Fatalf("agent on A: %d %s (call %s, want %s)", got.code, got.body, got.id, id)
		}
		reqs := up.Requests()
		if n := len(reqs) - before; n != 1 {
			t.Fatalf("the upstream saw %d requests for one approval", n)
		}
		lat = append(lat, reqs[len(reqs)-1].At.Sub(approvedAt))
	}
	slices.Sort(lat)
	t.Logf("approval (B) to upstream (via A) over %d rounds: p50 %v, max %v", rounds, lat[rounds/2], lat[rounds-1])
	if os.Getenv("E2E_DUMP") != "" {
		t.Log(a.stderr.String())
	}
}

func approveAPI(t *testing.T, base, id, key string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/approvals/"+id, strings.NewReader(`{"decision":"approve"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestRedisDown: with its Redis stopped, toolgate answers asks 503 and
// forwards nothing, while allow keeps working.
func TestRedisDown(t *testing.T) {
	testRedis(t) // Redis tests run where Redis is available
	addr, stop := testkit.RedisServer(t)
	_, up := newNotes(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+addr, newPrefix(), "http://127.0.0.1:1"),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	stop()

	start := time.Now()
	res, body := agentCall(t, a.proxy, "write_note", `{"path":"notes/x.txt","content":"x"}`)
	if res.StatusCode != 503 || !strings.Contains(body, `"decision":"unavailable"`) || time.Since(start) > 8*time.Second {
		t.Fatalf("ask with Redis down: %d after %v: %s", res.StatusCode, time.Since(start), body)
	}
	if res, body := agentCall(t, a.proxy, "read_file", `{"path":"README.md"}`); res.StatusCode != 200 {
		t.Fatalf("allow with Redis down: %d %s", res.StatusCode, body)
	}
	if res, _ := agentCall(t, a.proxy, "read_file", `{"path":".env"}`); res.StatusCode != 403 {
		t.Fatalf("deny with Redis down: %d", res.StatusCode)
	}
	if n := len(up.Requests()); n != 1 {
		t.Fatalf("the tool server saw %d requests, want only the allowed read", n)
	}
	if status, store := readyStore(t, a.admin); status != 200 || store["ok"] != false {
		t.Fatalf("readyz with Redis down: %d %v", status, store)
	}
	// Configured to, an unreachable store fails readiness.
	b := startServe(t, []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")}, []string{"TOOLGATE_PENDING_FAIL_READINESS=true"})
	if status, store := readyStore(t, b.admin); status != 503 || store["ok"] != false {
		t.Fatalf("readyz with Redis down and pending.fail_readiness: %d %v", status, store)
	}
	_ = context.Background
}

// readyStore is the status of admin's /readyz and the store's part of it.
func readyStore(t *testing.T, admin string) (int, map[string]any) {
	t.Helper()
	res, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Checks struct {
			Store map[string]any `json:"store"`
		} `json:"checks"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	return res.StatusCode, doc.Checks.Store
}

// TestAskOutcomes: a rejection reaches the held agent as 403 rejected; a
// denied call parks nothing (no notification, its ID approves nothing);
// an allowed call is executed without a notification; an unanswered call
// expires and is never executed.
func TestAskOutcomes(t *testing.T) {
	redisAddr := testRedis(t)
	files, up := newNotes(t)
	ev := newEvents(t)
	cfg := strings.Replace(e2eConfig(up.URL, "redis://"+redisAddr, newPrefix(), ev.URL), "  hold: 10s", "  hold: 3s\n  ttl: 3s", 1)
	dir := writeFiles(t, t.TempDir(), map[string]string{"toolgate.yaml": cfg, "rules.yaml": seedRulesYAML})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	// Allowed: executed, no notification.
	if res, _ := agentCall(t, a.proxy, "read_file", `{"path":"README.md"}`); res.StatusCode != 200 {
		t.Fatalf("allowed call: %d", res.StatusCode)
	}
	// Denied: blocked; its call ID is no parked call.
	res, _ := agentCall(t, a.proxy, "read_file", `{"path":".env"}`)
	if res.StatusCode != 403 {
		t.Fatalf("denied call: %d", res.StatusCode)
	}
	if code := approveAPI(t, a.approvals, res.Header.Get("X-Toolgate-Call-Id"), "alice-key-0123456789"); code != 404 {
		t.Fatalf("approving a denied call's ID: %d, want 404", code)
	}
	if n := len(ev.Requests()); n != 0 {
		t.Fatalf("%d notifications for an allowed and a denied call, want 0", n)
	}

	// Rejected while held: 403 rejected, never executed.
	done := make(chan *http.Response, 1)
	go func() {
		res, _ := agentCall(t, a.proxy, "write_note", `{"path":"notes/today.txt","content":"no"}`)
		done <- res
	}()
	var id string
	testkit.WaitFor(t, "an approval.requested event", func() bool {
		for _, data := range ev.requested(t) {
			id, _ = data["call_id"].(string)
		}
		return id != ""
	})
	req, _ := http.NewRequest("POST", a.approvals+"/api/approvals/"+id, strings.NewReader(`{"decision":"reject","comment":"not now"}`))
	req.Header.Set("Authorization", "Bearer alice-key-0123456789")
	rej, err := http.DefaultClient.Do(req)
	if err != nil || rej.StatusCode != 200 {
		t.Fatalf("reject: %v %v", rej, err)
	}
	rej.Body.Close()
	if got := <-done; got.StatusCode != 403 || got.Header.Get("X-Toolgate-Decision") != "rejected" {
		t.Fatalf("held agent after rejection: %d %q", got.StatusCode, got.Header.Get("X-Toolgate-Decision"))
	}

	// Unanswered: 202, then it expires after its 3s ttl, never executed.
	res, _ = agentCall(t, a.proxy, "write_note", `{"path":"notes/today.txt","content":"late"}`, "Prefer", "respond-async")
	if res.StatusCode != 202 {
		t.Fatalf("unanswered call: %d, want 202", res.StatusCode)
	}
	late := res.Header.Get("X-Toolgate-Call-Id")
	var doc map[string]any
	for deadline := time.Now().Add(10 * time.Second); doc["status"] != "expired" && time.Now().Before(deadline); {
		st, _ := http.NewRequest("GET", a.proxy+"/_toolgate/calls/"+late+"?wait=2s", nil)
		st.Header.Set("Authorization", "Bearer agent-key-0123456789")
		sr, err := http.DefaultClient.Do(st)
		if err != nil {
			t.Fatal(err)
		}
		doc = nil
		_ = json.NewDecoder(sr.Body).Decode(&doc)
		sr.Body.Close()
	}
	if doc["status"] != "expired" {
		t.Fatalf("unanswered call after its ttl: %v", doc)
	}
	if content, _ := files.Read("notes/today.txt"); content != "draft" || len(up.Requests()) != 1 {
		t.Fatalf("file %q, upstream requests %d: a refused call was executed", content, len(up.Requests()))
	}
}

// TestShutdownWithHeldCalls: SIGTERM (the run context ending) while agents
// are held answers each of them 202 at once, and every parked call stays
// waiting in Redis for another replica to resume.
func TestShutdownWithHeldCalls(t *testing.T) {
	redisAddr := testRedis(t)
	_, up := newNotes(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+redisAddr, newPrefix(), "http://127.0.0.1:1"),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	b := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	const held = 5
	type answer struct {
		code int
		id   string
	}
	answers := make(chan answer, held)
	for i := range held {
		go func() {
			res, _ := agentCall(t, a.proxy, "write_note", fmt.Sprintf(`{"path":"notes/s%d.txt","content":"x"}`, i))
			answers <- answer{res.StatusCode, res.Header.Get("X-Toolgate-Call-Id")}
		}()
	}
	waitingOnB := func() int {
		req, _ := http.NewRequest("GET", b.approvals+"/api/approvals?status=waiting", nil)
		req.Header.Set("Authorization", "Bearer alice-key-0123456789")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var list struct {
			Calls []map[string]any `json:"calls"`
		}
		_ = json.NewDecoder(res.Body).Decode(&list)
		return len(list.Calls)
	}
	for deadline := time.Now().Add(5 * time.Second); waitingOnB() < held; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls parked", waitingOnB(), held)
		}
	}
	start := time.Now()
	a.cancel() // what SIGTERM does to run()
	for range held {
		got := <-answers
		if got.code != 202 || got.id == "" {
			t.Fatalf("held agent at shutdown: %d", got.code)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("held agents answered %v after shutdown began", d)
	}
	if code := <-a.done; code != 0 {
		t.Fatalf("replica A exited %d", code)
	}
	a.done <- 0
	if n := waitingOnB(); n != held {
		t.Fatalf("%d calls still waiting after A stopped, want %d", n, held)
	}
}
