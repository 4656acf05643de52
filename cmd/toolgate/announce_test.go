package main

import (
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

func announceConfig(upstream, notifyURL string, more ...string) string {
	return strings.Join(more, "") + `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams:
  - {name: files, url: ` + upstream + `}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  rules_file: ./rules.yaml
pending:
  ttl: 1m
approvals:
  secret: ` + testSecret + `
  approvers: [{name: alice, key: alice-key-0123456789}]
  notify: [{url: ` + notifyURL + `, format: cloudevents, concurrency: 1}]
shutdown_grace: 2s
`
}

// announcing starts a toolgate whose notification queue holds queueSize
// events and whose re-announcer runs every 50ms for calls waiting a
// second. Its receiver holds the first event until open is called. park
// parks a call asynchronously and returns its ID.
func announcing(t *testing.T, queueSize int, config ...string) (tg replica, ev events, open func(), park func(content string) string) {
	t.Helper()
	return announcingHeld(t, queueSize, func(n int) bool { return n == 0 }, config...)
}

// announcingHeld is announcing whose receiver holds, until open is
// called, the requests held says (by their number, from 0).
func announcingHeld(t *testing.T, queueSize int, held func(n int) bool, config ...string) (tg replica, ev events, open func(), park func(content string) string) {
	t.Helper()
	oldEvery, oldAfter, oldQueue := reannounceEvery, reannounceAfter, notifyQueueSize
	reannounceEvery, reannounceAfter, notifyQueueSize = 50*time.Millisecond, time.Second, queueSize
	t.Cleanup(func() { reannounceEvery, reannounceAfter, notifyQueueSize = oldEvery, oldAfter, oldQueue })

	release := make(chan struct{})
	var releaseOnce sync.Once
	open = func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(open)
	ev = events{testkit.NewUpstream(t, func(n int, _ http.ResponseWriter, r *http.Request) {
		if held(n) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})}
	up := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": announceConfig(up.URL, ev.URL, config...),
		"rules.yaml":    "rules:\n  - {id: r1, effect: ask, tool: write_note, target: \"*\"}\n",
	})
	tg = startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	park = func(content string) string {
		t.Helper()
		res, body := agentCall(t, tg.proxy, "write_note", `{"path":"a.txt","content":"`+content+`"}`, "Prefer", "respond-async")
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("ask: %d %s, want 202", res.StatusCode, body)
		}
		return res.Header.Get("X-Toolgate-Call-Id")
	}
	return tg, ev, open, park
}

// announcedOnce checks, after the re-announcer has had time to run
// again, that each call's requested event arrived exactly once.
func announcedOnce(t *testing.T, ev events, ids ...string) {
	t.Helper()
	time.Sleep(reannounceAfter + 10*reannounceEvery)
	count := map[string]int{}
	for _, d := range ev.requested(t) {
		id, _ := d["call_id"].(string)
		count[id]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("%s was announced %d times, want once (requested events: %v)", id, count[id], count)
		}
	}
}

// TestReannounce: a full notification queue drops a call's requested
// event; the re-announcer sends it later, with its approval link, and
// announces no call again once its event was delivered.
func TestReannounce(t *testing.T) {
	tg, ev, open, park := announcing(t, 1)
	first := park("1")
	testkit.WaitFor(t, "the first event at the receiver", func() bool { return len(ev.Requests()) == 1 })
	queued := park("2")  // waits in the queue
	dropped := park("3") // the queue is full: dropped
	eventually(t, tg.admin, "toolgate_notifications_total", 1, "format", "cloudevents", "result", "dropped")
	open()

	// The dropped call is announced again once it has waited a second,
	// with a working approval link.
	link, token := relink(t, ev.approvalURL(t, dropped), tg.approvals)
	if pg, err := http.Get(link + "?token=" + url.QueryEscape(token)); err != nil || pg.StatusCode != http.StatusOK {
		t.Fatalf("the re-announced approval link: %v %v", pg, err)
	} else {
		pg.Body.Close()
	}
	eventually(t, tg.admin, "toolgate_notifications_reannounced_total", 1, "event", "requested")

	// Every call's event has been delivered now: nothing is announced
	// again, however long the calls wait.
	announcedOnce(t, ev, first, queued, dropped)
	if got := value(t, scrape(t, tg.admin), "toolgate_notifications_reannounced_total", "event", "requested"); got != 1 {
		t.Errorf("toolgate_notifications_reannounced_total = %v, want 1", got)
	}
}

// TestReannounceSkipsInFlight: an event still being delivered is not
// queued again, however long its delivery takes.
func TestReannounceSkipsInFlight(t *testing.T) {
	tg, ev, open, park := announcing(t, 0)
	first := park("1")
	testkit.WaitFor(t, "the first event at the receiver", func() bool { return len(ev.Requests()) == 1 })
	time.Sleep(reannounceAfter + 10*reannounceEvery) // the call is due, its event still in flight
	open()
	announcedOnce(t, ev, first)
	if got := value(t, scrape(t, tg.admin), "toolgate_notifications_reannounced_total", "event", "requested"); got != 0 {
		t.Errorf("toolgate_notifications_reannounced_total = %v, want 0", got)
	}
}

// TestReannounceBurst: a burst of parks that outran a small queue is
// announced again as the queue has room, every call once, and none of
// the events sent again is dropped by the queue it was sent to.
func TestReannounceBurst(t *testing.T) {
	tg, ev, open, park := announcing(t, 2)
	ids := []string{park("0")}
	testkit.WaitFor(t, "the first event at the receiver", func() bool { return len(ev.Requests()) == 1 })
	for i := 1; i < 8; i++ {
		ids = append(ids, park(string(rune('0'+i))))
	}
	// One in delivery, two queued, five dropped.
	eventually(t, tg.admin, "toolgate_notifications_total", 5, "format", "cloudevents", "result", "dropped")
	open()
	eventually(t, tg.admin, "toolgate_notifications_reannounced_total", 5, "event", "requested")
	announcedOnce(t, ev, ids...)
	if got := value(t, scrape(t, tg.admin), "toolgate_notifications_total", "format", "cloudevents", "result", "dropped"); got != 5 {
		t.Errorf("%v events dropped, want the burst's 5 and none of those announced again", got)
	}
}

// TestReannounceFullByBytes: while a stuck receiver holds a target's
// queue full by bytes (large calls), the re-announcer reads and sends
// nothing: each round used to read the dropped calls, arguments and all,
// build their events and drop them again. Once the receiver takes them,
// every call is announced, once.
func TestReannounceFullByBytes(t *testing.T) {
	// Every request held: under load the parks may outlast an attempt's
	// 10 s, and a lane whose attempt ended would take the next events.
	tg, ev, open, park := announcingHeld(t, 1024, func(int) bool { return true }, "limits: {max_body_bytes: 8388608}\n")
	ids := []string{park("0")}
	testkit.WaitFor(t, "the first event at the receiver", func() bool { return len(ev.Requests()) == 1 })
	large := strings.Repeat("x", 4_000_000)
	for i := range 20 { // 16 fill the 64 MiB a target may queue
		ids = append(ids, park(large+strconv.Itoa(i)))
	}
	dropped := func() float64 {
		return value(t, scrape(t, tg.admin), "toolgate_notifications_total", "format", "cloudevents", "result", "dropped")
	}
	testkit.WaitForWithin(t, time.Minute, "events dropped", func() bool { return dropped() > 0 })
	before := dropped()
	time.Sleep(reannounceAfter + 10*reannounceEvery) // the dropped calls are due
	if got := dropped(); got != before {
		t.Errorf("%v events dropped while the receiver was stuck, then %v: the re-announcer sent events the queue had no room for", before, got)
	}
	if got := value(t, scrape(t, tg.admin), "toolgate_notifications_reannounced_total", "event", "requested"); got != 0 {
		t.Errorf("%v events sent again while the queue was full by bytes, want 0", got)
	}
	open()
	// Each dropped call is announced again once. (A call may reach the
	// receiver twice all the same: an attempt the held receiver let time
	// out is tried again, and both arrive once it answers.)
	reannounced := func() float64 {
		return value(t, scrape(t, tg.admin), "toolgate_notifications_reannounced_total", "event", "requested")
	}
	testkit.WaitForWithin(t, 2*time.Minute, "every call announced", func() bool { return allRequested(t, ev, ids) })
	if got := reannounced(); got != before {
		t.Errorf("%v events sent again, want the %v dropped", got, before)
	}
}

// allRequested reports whether ev received a requested event for each of
// ids.
func allRequested(t *testing.T, ev events, ids []string) bool {
	t.Helper()
	var seen []string
	for _, d := range ev.requested(t) {
		id, _ := d["call_id"].(string)
		seen = append(seen, id)
	}
	return !slices.ContainsFunc(ids, func(id string) bool { return !slices.Contains(seen, id) })
}

// resolvedEvents returns the ids and outcomes of the approval.resolved
// events received so far, in order.
func resolvedEvents(t *testing.T, ev events) (ids, outcomes []string) {
	t.Helper()
	for _, e := range ev.got(t) {
		if e["type"] != "dev.toolgate.approval.resolved" {
			continue
		}
		data, _ := e["data"].(map[string]any)
		id, _ := e["id"].(string)
		outcome, _ := data["outcome"].(string)
		ids, outcomes = append(ids, id), append(outcomes, outcome)
	}
	return ids, outcomes
}

// TestReresolve: a full notification queue drops a decision's resolved
// event; the re-announcer sends it later, with the event id and outcome
// it had, although the call has run since, and sends it once.
func TestReresolve(t *testing.T) {
	tg, ev, open, park := announcing(t, 1)
	first := park("1")
	testkit.WaitFor(t, "the first event at the receiver", func() bool { return len(ev.Requests()) == 1 })
	park("2") // its requested event fills the queue
	if code := decideAPI(t, tg.approvals, first, "approve"); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	eventually(t, tg.admin, "toolgate_notifications_total", 1, "format", "cloudevents", "result", "dropped")
	open()
	eventually(t, tg.admin, "toolgate_notifications_reannounced_total", 1, "event", "resolved")
	testkit.WaitFor(t, "the call to run", func() bool {
		_, body := apiRequest(t, "GET", tg.approvals+"/api/approvals/"+first, "alice-key-0123456789", "")
		return strings.Contains(body, `"status":"executed"`)
	})
	time.Sleep(reannounceAfter + 10*reannounceEvery) // nothing more is sent
	ids, outcomes := resolvedEvents(t, ev)
	if len(ids) != 1 || ids[0] != first+".resolved" || outcomes[0] != "approved" {
		t.Errorf("resolved events %v with outcomes %v, want [%s.resolved] approved, once", ids, outcomes, first)
	}
	if got := value(t, scrape(t, tg.admin), "toolgate_notifications_reannounced_total", "event", "resolved"); got != 1 {
		t.Errorf("toolgate_notifications_reannounced_total{event=resolved} = %v, want 1", got)
	}
}

// TestReresolveAcrossReplicas: the resolved event of a decision made on a
// replica that stops before sending it is sent by another replica: the
// store recorded the end with the decision (the outbox), and nothing
// recorded it settled.
func TestReresolveAcrossReplicas(t *testing.T) {
	redisAddr := testRedis(t)
	oldEvery, oldAfter := reannounceEvery, reannounceAfter
	reannounceEvery, reannounceAfter = 50*time.Millisecond, time.Second
	t.Cleanup(func() { reannounceEvery, reannounceAfter = oldEvery, oldAfter })
	// The receiver holds the first event until its sender gives up: the
	// first replica's lane stays busy, and the resolved event waits
	// behind it.
	ev := events{testkit.NewUpstream(t, func(n int, _ http.ResponseWriter, r *http.Request) {
		if n == 0 {
			<-r.Context().Done()
		}
	})}
	_, up := newNotes(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+redisAddr, newPrefix(), ev.URL),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	b := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	res, body := agentCall(t, a.proxy, "write_note", `{"path":"a.txt","content":"x"}`, "Prefer", "respond-async")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("ask: %d %s", res.StatusCode, body)
	}
	id := res.Header.Get("X-Toolgate-Call-Id")
	testkit.WaitFor(t, "the first event at the receiver", func() bool { return len(ev.Requests()) == 1 })
	if code := decideAPI(t, a.approvals, id, "approve"); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	// The first replica stops: its queued resolved event is lost with it.
	a.cancel()
	code := <-a.done
	a.done <- code // for the test's cleanup
	eventually(t, b.admin, "toolgate_notifications_reannounced_total", 1, "event", "resolved")
	testkit.WaitFor(t, "the resolved event at the receiver", func() bool { ids, _ := resolvedEvents(t, ev); return len(ids) > 0 })
	ids, outcomes := resolvedEvents(t, ev)
	if ids[0] != id+".resolved" || outcomes[0] != "approved" {
		t.Errorf("resolved event %s with outcome %s, want %s.resolved approved", ids[0], outcomes[0], id)
	}
}
