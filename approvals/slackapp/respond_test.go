package slackapp

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/notify"
)

// TestResponseURLNotAllowed: a response_url the default refuses (here
// one with user info) is never posted to, and the click decides nothing.
func TestResponseURLNotAllowed(t *testing.T) {
	e := newEnv(t, nil, func(c *Config) { c.AllowResponseURL = nil }) // the default
	u, _ := url.Parse(e.slack.URL + "/r")
	u.User = url.UserPassword("u", "p")
	status, _ := e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", u.String(), nil))))
	if status != http.StatusBadRequest {
		t.Errorf("status %d, want 400", status)
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called: %v", d)
	}
	if n := len(e.slack.Requests()); n != 0 {
		t.Errorf("%d posts to a refused response_url", n)
	}
}

// TestResponseURLOfAStandIn: the default posts to the response_url the
// signed payload names, on Slack or not (GovSlack, a test stand-in).
func TestResponseURLOfAStandIn(t *testing.T) {
	e := newEnv(t, nil, func(c *Config) { c.AllowResponseURL = nil })
	status, _ := e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))))
	if status != http.StatusOK {
		t.Errorf("status %d, want 200", status)
	}
	e.close(t)
	if d := e.decisions(); len(d) != 1 {
		t.Errorf("decisions %v, want one", d)
	}
	if n := len(e.slack.Requests()); n != 1 {
		t.Errorf("%d posts to the response_url, want the update", n)
	}
}

func TestResponseURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://hooks.slack.com/actions/T0/1/x": true,
		"https://hooks.slack-gov.com/actions/x":  true,
		"http://127.0.0.1:8080/respond":          true,
		"http://localhost:8080/respond":          true,
		"http://[::1]:8080/respond":              true,
		"http://169.254.169.254/latest":          false,
		"http://hooks.slack.com/actions/x":       false,
		"http://10.0.0.5/respond":                false,
		"https://hooks.slack.com:8443/x":         true,
		"https://user:pw@hooks.slack.com/x":      false,
		"ftp://hooks.slack.com/x":                false,
		"javascript:alert(1)":                    false,
		"/actions/T0/1/x":                        false,
		"https:///x":                             false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := ResponseURL(u); got != want {
			t.Errorf("ResponseURL(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestResponseURLNotLogged: response_url is a credential to post into the
// channel; no log line holds it, even when posting to it fails.
func TestResponseURLNotLogged(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.slack.Close() // every post fails
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/actions/SECRETPATH", nil))))
	e.close(t)
	logs := e.logs.String()
	if !strings.Contains(logs, "slack answer not delivered") {
		t.Errorf("failed post not logged:\n%s", logs)
	}
	if strings.Contains(logs, "SECRETPATH") {
		t.Errorf("logs hold the response_url:\n%s", logs)
	}
}

// TestInFlightBounded: posts to a stuck response_url are bounded; past the
// bound answers are dropped and logged, and Close gives up when told to.
func TestInFlightBounded(t *testing.T) {
	release := make(chan struct{})
	stuck := testkit.NewUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	e := newEnv(t, nil, func(c *Config) {
		c.AllowResponseURL = func(*url.URL) bool { return true }
	})
	for i := range MaxInFlight + 2 {
		id := "c" + strconv.Itoa(i)
		if status, _ := e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, id, stuck.URL+"/r", nil)))); status != http.StatusOK {
			t.Fatalf("click %d: status %d", i, status)
		}
	}
	testkit.WaitFor(t, "the posts in flight", func() bool { return len(stuck.Requests()) == MaxInFlight })
	if n := strings.Count(e.logs.String(), "too many in flight"); n != 2 {
		t.Errorf("%d answers dropped, want 2", n)
	}
	if d := e.decisions(); len(d) != MaxInFlight+2 {
		t.Errorf("%d decisions, want %d: a dropped answer does not undo the decision", len(d), MaxInFlight+2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.h.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v after its context ended", took)
	}
	if len(stuck.Requests()) != MaxInFlight {
		t.Errorf("%d posts, want %d", len(stuck.Requests()), MaxInFlight)
	}
}

func TestCloseWaitsForPosts(t *testing.T) {
	slow := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(200 * time.Millisecond)
	})
	e := newEnv(t, nil, func(c *Config) { c.AllowResponseURL = func(*url.URL) bool { return true } })
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", slow.URL+"/r", nil))))
	e.close(t)
	if strings.Count(e.logs.String(), "slack answer delivered") != 1 {
		t.Errorf("Close returned before the post finished:\n%s", e.logs.String())
	}
	// After Close nothing more is posted.
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c2", slow.URL+"/r", nil))))
	if !strings.Contains(e.logs.String(), "shutting down") {
		t.Errorf("answer after Close not dropped:\n%s", e.logs.String())
	}
}
