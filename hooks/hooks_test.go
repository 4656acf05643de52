package hooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/notify"
)

const testInput = `{"version":"toolgate/v1","call_id":"c1","kind":"rest","tool":{"name":"deploy_prod","arguments":{"env":"prod"}}}`

// answering returns a Responder that answers 200 with body.
func answering(body string) testkit.Responder {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

// newHookServer starts a recording hook server answering body.
func newHookServer(t *testing.T, body string) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, answering(body))
}

// newRunner builds a Runner over hooks with a discarding logger, failing
// the test on a configuration error.
func newRunner(t *testing.T, opts Options) *Runner {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// hookNames lists the Hook of each opinion.
func hookNames(ops []Opinion) []string {
	var names []string
	for _, op := range ops {
		names = append(names, op.Hook)
	}
	return names
}

func TestNewValidates(t *testing.T) {
	ok := Hook{Name: "freeze", URL: "http://127.0.0.1:7000/hook"}
	with := func(f func(*Hook)) []Hook {
		h := ok
		f(&h)
		return []Hook{h}
	}
	tests := []struct {
		name  string
		hooks []Hook
		want  string // substring of the error; "" for none
	}{
		{"a minimal hook is fine", []Hook{ok}, ""},
		{"https, globs, bounds and secrets are fine", with(func(h *Hook) {
			h.URL, h.Upstream, h.Tool, h.Timeout, h.OnFailure, h.Secret =
				"https://hooks.example.com/x?k=v", "notes-*", "{deploy,release}_*", MaxTimeout, Ask, "whsec_c2VjcmV0"
		}), ""},
		{"empty name", with(func(h *Hook) { h.Name = "" }), "name must be"},
		{"name with a space", with(func(h *Hook) { h.Name = "change freeze" }), "name must be"},
		{"name too long", with(func(h *Hook) { h.Name = strings.Repeat("a", 65) }), "name must be"},
		{"duplicate names", []Hook{ok, ok}, `name "freeze" is used twice`},
		{"ftp url", with(func(h *Hook) { h.URL = "ftp://example.com/x" }), "http or https"},
		{"relative url", with(func(h *Hook) { h.URL = "/hook" }), "http or https"},
		{"url without host", with(func(h *Hook) { h.URL = "http:///hook" }), "no host"},
		{"url with user information", with(func(h *Hook) { h.URL = "http://u:p@example.com/" }), "user information"},
		{"unparseable url", with(func(h *Hook) { h.URL = "http://[::1" }), "does not parse"},
		{"bad upstream glob", with(func(h *Hook) { h.Upstream = "[a" }), "upstream glob"},
		{"bad tool glob", with(func(h *Hook) { h.Tool = "{a" }), "tool glob"},
		{"negative timeout", with(func(h *Hook) { h.Timeout = -time.Second }), "negative"},
		{"timeout above 30s", with(func(h *Hook) { h.Timeout = 31 * time.Second }), "at most 30s"},
		{"unknown on_failure", with(func(h *Hook) { h.OnFailure = "none" }), "on_failure"},
		{"bad whsec secret", with(func(h *Hook) { h.Secret = "whsec_!!!" }), "not valid base64"},
		{"empty whsec secret", with(func(h *Hook) { h.Secret = "whsec_" }), "empty key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{Hooks: tt.hooks})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New = %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want an error containing %q", err, tt.want)
			}
			if err != nil {
				for _, secret := range []string{"p@", "!!!", "k=v"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q repeats part of the URL or secret", err)
					}
				}
			}
		})
	}
	if _, err := New(Options{MaxInFlight: -1}); err == nil {
		t.Error("New(MaxInFlight: -1) = nil error")
	}
}

func TestMatching(t *testing.T) {
	all := newHookServer(t, `{"decision":"none"}`)
	deploys := newHookServer(t, `{"decision":"none"}`)
	notes := newHookServer(t, `{"decision":"none"}`)
	del := newHookServer(t, `{"decision":"none"}`)
	r := newRunner(t, Options{Hooks: []Hook{
		{Name: "all", URL: all.URL},
		{Name: "deploys", URL: deploys.URL, Tool: "deploy_*"},
		{Name: "notes", URL: notes.URL, Upstream: "notes-{eu,us}", Tool: "write_*"},
		{Name: "del", URL: del.URL, Tool: "delete_file"},
	}})
	tests := []struct {
		upstream, tool string
		want           []*testkit.Upstream
	}{
		{"ci", "deploy_prod", []*testkit.Upstream{all, deploys}},
		{"ci", "deployprod", []*testkit.Upstream{all}},
		// A router that ignores case runs it as deploy_prod.
		{"ci", "DEPLOY_Prod", []*testkit.Upstream{all, deploys}},
		// Rails' (.:format) runs it as deploy_prod.
		{"ci", "deploy_prod.json", []*testkit.Upstream{all, deploys}},
		// Any suffix: Rails' (.:format) takes any extension, Spring's
		// suffix match any suffix.
		{"ci", "delete_file.zzz", []*testkit.Upstream{all, del}},
		{"ci", "Delete_File.json.zzz", []*testkit.Upstream{all, del}},
		{"ci", "delete_file.", []*testkit.Upstream{all, del}},
		{"ci", "delete_files", []*testkit.Upstream{all}},
		{"notes-eu", "write_note", []*testkit.Upstream{all, notes}},
		{"notes-asia", "write_note", []*testkit.Upstream{all}},
		{"notes-us", "read_note", []*testkit.Upstream{all}},
	}
	for _, tt := range tests {
		t.Run(tt.upstream+"/"+tt.tool, func(t *testing.T) {
			for _, s := range []*testkit.Upstream{all, deploys, notes, del} {
				s.Reset()
			}
			v := r.Run(t.Context(), "key:agent", tt.upstream, tt.tool, true, []byte(testInput))
			if v.Ran != len(tt.want) {
				t.Errorf("Ran = %d, want %d", v.Ran, len(tt.want))
			}
			for _, s := range []*testkit.Upstream{all, deploys, notes, del} {
				want := 0
				if slices.Contains(tt.want, s) {
					want = 1
				}
				if got := len(s.Requests()); got != want {
					t.Errorf("%s received %d requests, want %d", s.URL, got, want)
				}
			}
			if !r.Matches(tt.upstream, tt.tool, true) {
				t.Errorf("Matches(%q, %q) = false, want true", tt.upstream, tt.tool)
			}
		})
	}

	only := newRunner(t, Options{Hooks: []Hook{{Name: "deploys", URL: deploys.URL, Tool: "deploy_*"}}})
	if only.Matches("ci", "read_file", true) {
		t.Error("Matches(ci, read_file) = true for a deploy_* hook")
	}
	deploys.Reset()
	v := only.Run(t.Context(), "key:agent", "ci", "read_file", true, []byte(testInput))
	if diff := cmp.Diff(Verdict{Decision: None}, v); diff != "" {
		t.Errorf("Run without a matching hook (-want +got):\n%s", diff)
	}
	if n := len(deploys.Requests()); n != 0 {
		t.Errorf("a hook that does not match received %d requests", n)
	}
	if empty := newRunner(t, Options{}); empty.Matches("a", "b", true) {
		t.Error("a Runner without hooks matches")
	}
	// An MCP server looks a tool's name up as spelt: its dotted tool
	// fs.read_file is not fs, nor delete_file.zzz delete_file.
	del.Reset()
	if v := r.Run(t.Context(), "key:agent", "ci", "delete_file.zzz", false, []byte(testInput)); v.Ran != 1 || len(del.Requests()) != 0 {
		t.Errorf("an MCP call of delete_file.zzz asked %d hooks, the delete_file hook %d times; want 1 (all) and none", v.Ran, len(del.Requests()))
	}
	if !r.Matches("ci", "delete_file.zzz", true) || !r.Matches("ci", "delete_file", false) {
		t.Error("a REST call of delete_file.zzz, or an MCP call of delete_file, does not match the delete_file hook")
	}
}

// TestRequest holds what a hook receives: the input bytes as given, and
// no header toolgate did not choose to send, even when the client given
// has a cookie jar holding cookies for the hook.
func TestRequest(t *testing.T) {
	srv := newHookServer(t, `{"decision":"allow"}`)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: "session", Value: "secret"}})
	now := time.Date(2026, 11, 29, 21, 15, 2, 0, time.UTC)
	r := newRunner(t, Options{
		Hooks:  []Hook{{Name: "h", URL: srv.URL + "/hook?x=1"}},
		Client: &http.Client{Jar: jar},
		Now:    func() time.Time { return now },
	})
	for range 2 {
		if v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput)); v.Decision != Allow {
			t.Fatalf("Decision = %q, want allow (%+v)", v.Decision, v.Reasons)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("hook received %d requests, want 2", len(reqs))
	}
	for _, req := range reqs {
		if req.Method != http.MethodPost || req.Path != "/hook" || req.Query != "x=1" {
			t.Errorf("request = %s %s?%s, want POST /hook?x=1", req.Method, req.Path, req.Query)
		}
		if string(req.Body) != testInput {
			t.Errorf("body = %s, want the input as given", req.Body)
		}
		var names []string
		for k := range req.Header {
			names = append(names, k)
		}
		slices.Sort(names)
		want := []string{"Accept-Encoding", "Content-Length", "Content-Type", "User-Agent", "Webhook-Id", "Webhook-Timestamp"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("headers sent (-want +got):\n%s", diff)
		}
		for k, want := range map[string]string{
			"Content-Type":      "application/json",
			"User-Agent":        "toolgate-hooks",
			"Webhook-Timestamp": strconv.FormatInt(now.Unix(), 10),
		} {
			if got := req.Header.Get(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if req.Header.Get("Webhook-Id") == "" {
			t.Error("no webhook-id")
		}
	}
	if a, b := reqs[0].Header.Get("Webhook-Id"), reqs[1].Header.Get("Webhook-Id"); a == b {
		t.Errorf("two requests share webhook-id %q", a)
	}
}

func TestSignature(t *testing.T) {
	for _, tt := range []struct {
		name, secret string
		key          []byte
	}{
		{"whsec secret", "whsec_" + base64.StdEncoding.EncodeToString([]byte("hook-key-bytes")), []byte("hook-key-bytes")},
		{"raw secret", "a raw secret", []byte("a raw secret")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newHookServer(t, `{"decision":"none"}`)
			r := newRunner(t, Options{Hooks: []Hook{{Name: "signed", URL: srv.URL, Secret: tt.secret}}})
			r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("hook received %d requests, want 1", len(reqs))
			}
			req := reqs[0]
			// Standard Webhooks, computed here: HMAC-SHA256 of id.timestamp.body.
			mac := hmac.New(sha256.New, tt.key)
			io.WriteString(mac, req.Header.Get("webhook-id")+"."+req.Header.Get("webhook-timestamp")+".")
			mac.Write(req.Body)
			want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
			if got := req.Header.Get("webhook-signature"); got != want {
				t.Errorf("webhook-signature = %q, want %q", got, want)
			}
			if err := notify.Verify(tt.secret, req.Header, req.Body, 0); err != nil {
				t.Errorf("notify.Verify = %v", err)
			}
			if err := notify.Verify("whsec_"+base64.StdEncoding.EncodeToString([]byte("other")), req.Header, req.Body, 0); err == nil {
				t.Error("notify.Verify with another secret = nil")
			}
		})
	}
}

func TestCombine(t *testing.T) {
	tests := []struct {
		name        string
		answers     []string // one hook per answer, named h0, h1, …
		want        string
		wantReasons []string // hooks whose opinions are the reasons
	}{
		{"one allow", []string{`{"decision":"allow","reason":"no freeze"}`}, Allow, []string{"h0"}},
		{"none alone", []string{`{"decision":"none"}`}, None, nil},
		{"allow beats none", []string{`{"decision":"none"}`, `{"decision":"allow"}`}, Allow, []string{"h1"}},
		{"ask beats allow", []string{`{"decision":"allow"}`, `{"decision":"ask"}`, `{"decision":"none"}`}, Ask, []string{"h1"}},
		{"deny beats ask and allow", []string{`{"decision":"ask"}`, `{"decision":"deny"}`, `{"decision":"allow"}`}, Deny, []string{"h1"}},
		{"every deny is a reason", []string{`{"decision":"deny"}`, `{"decision":"ask"}`, `{"decision":"deny","reason":"frozen"}`}, Deny, []string{"h0", "h2"}},
		{"every ask is a reason", []string{`{"decision":"ask"}`, `{"decision":"ask"}`}, Ask, []string{"h0", "h1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooks []Hook
			for i, a := range tt.answers {
				hooks = append(hooks, Hook{Name: "h" + strconv.Itoa(i), URL: newHookServer(t, a).URL})
			}
			v := newRunner(t, Options{Hooks: hooks}).Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
			if v.Decision != tt.want {
				t.Errorf("Decision = %q, want %q", v.Decision, tt.want)
			}
			if diff := cmp.Diff(tt.wantReasons, hookNames(v.Reasons)); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if v.Ran != len(tt.answers) {
				t.Errorf("Ran = %d, want %d", v.Ran, len(tt.answers))
			}
		})
	}
	v := newRunner(t, Options{Hooks: []Hook{{Name: "freeze", URL: newHookServer(t, `{"decision":"deny","reason":"change freeze until Monday"}`).URL}}}).
		Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
	want := Verdict{Decision: Deny, Ran: 1, Reasons: []Opinion{{Decision: Deny, Hook: "freeze", Reason: "change freeze until Monday"}}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
}

// TestConcurrent holds that the hooks of a call are asked at once: each
// of the two hooks answers allow only once both requests are in flight.
func TestConcurrent(t *testing.T) {
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	barrier := func(_ int, w http.ResponseWriter, _ *http.Request) {
		arrived.Done()
		select {
		case <-both:
			_, _ = io.WriteString(w, `{"decision":"allow"}`)
		case <-time.After(time.Second):
			_, _ = io.WriteString(w, `{"decision":"deny","reason":"asked one after the other"}`)
		}
	}
	a, b := testkit.NewUpstream(t, barrier), testkit.NewUpstream(t, barrier)
	r := newRunner(t, Options{Hooks: []Hook{{Name: "a", URL: a.URL}, {Name: "b", URL: b.URL}}})
	start := time.Now()
	v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
	if v.Decision != Allow {
		t.Errorf("Decision = %q (%+v), want allow: the hooks were not in flight together", v.Decision, v.Reasons)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("Run took %v", d)
	}
}

func TestTimeout(t *testing.T) {
	slow := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})
	for _, tt := range []struct{ onFailure, want string }{{"", Deny}, {Deny, Deny}, {Ask, Ask}, {Allow, Allow}} {
		t.Run("on_failure "+tt.onFailure, func(t *testing.T) {
			r := newRunner(t, Options{Hooks: []Hook{{Name: "freeze", URL: slow.URL, Timeout: 100 * time.Millisecond, OnFailure: tt.onFailure}}})
			start := time.Now()
			v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
			if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
				t.Errorf("Run took %v, want about the 100ms timeout", d)
			}
			want := Verdict{Decision: tt.want, Ran: 1, Reasons: []Opinion{{
				Decision: tt.want, Hook: "freeze", Reason: "hook freeze failed: timeout after 100ms", Failed: true,
			}}}
			if diff := cmp.Diff(want, v); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the call ends first", func(t *testing.T) {
		r := newRunner(t, Options{Hooks: []Hook{{Name: "freeze", URL: slow.URL}}})
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		v := r.Run(ctx, "key:agent", "u", "t", true, []byte(testInput))
		if len(v.Reasons) != 1 || v.Decision != Deny || v.Reasons[0].Reason != "hook freeze failed: the call ended before the hook answered" {
			t.Errorf("verdict = %+v, want deny because the call ended", v)
		}
	})
}

func TestFailures(t *testing.T) {
	status := func(code int, body string) testkit.Responder {
		return func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}
	}
	tests := []struct {
		name    string
		respond testkit.Responder
		why     string
	}{
		{"server error", status(http.StatusInternalServerError, `{"decision":"allow"}`), "status 500"},
		{"client error", status(http.StatusForbidden, `{"decision":"allow"}`), "status 403"},
		{"no content", status(http.StatusNoContent, ""), "invalid response: json: unexpected end of input at offset 0"},
		{"invalid JSON", answering(`{"decision":"allow"`), "invalid response: json: unexpected end of input at offset 19"},
		{"not an object", answering(`["allow"]`), "invalid response: json: top level is not an object at offset 0"},
		{"trailing data", answering(`{"decision":"allow"} {}`), "invalid response: json: data after top-level value at offset 21"},
		{"unknown key", answering(`{"decision":"allow","continue":true}`), "invalid response: unknown key (allowed: decision, reason, updated_arguments)"},
		{"case variant of a key", answering(`{"Decision":"allow"}`), "invalid response: unknown key (allowed: decision, reason, updated_arguments)"},
		{"duplicate key", answering(`{"decision":"deny","decision":"allow"}`), "invalid response: json: duplicate object key at offset 19"},
		{"invalid UTF-8", answering("{\"decision\":\"allow\",\"reason\":\"\xff\"}"), "invalid response: json: invalid UTF-8 at offset 30"},
		{"no decision", answering(`{"reason":"fine"}`), "invalid response: decision must be allow, ask, deny or none"},
		{"null decision", answering(`{"decision":null}`), "invalid response: decision must be allow, ask, deny or none"},
		{"unknown decision", answering(`{"decision":"approve"}`), "invalid response: decision must be allow, ask, deny or none"},
		{"upper-case decision", answering(`{"decision":"ALLOW"}`), "invalid response: decision must be allow, ask, deny or none"},
		{"reason not a string", answering(`{"decision":"allow","reason":["a"]}`), "invalid response: reason must be a string"},
		{"reason too long", answering(`{"decision":"allow","reason":"` + strings.Repeat("x", MaxReasonBytes+1) + `"}`), "invalid response: reason longer than 1024 bytes"},
		{"arguments not an object", answering(`{"decision":"allow","updated_arguments":["x"]}`), "invalid response: updated_arguments must be an object"},
		{"arguments a string", answering(`{"decision":"allow","updated_arguments":"{}"}`), "invalid response: updated_arguments must be an object"},
		{"arguments with a duplicate key", answering(`{"decision":"allow","updated_arguments":{"a":1,"a":2}}`), "invalid response: json: duplicate object key at offset 47"},
		{"response too large", answering(`{"decision":"allow","reason":"` + strings.Repeat("x", MaxResponseBytes) + `"}`), "response larger than 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewUpstream(t, tt.respond)
			r := newRunner(t, Options{Hooks: []Hook{{Name: "h", URL: srv.URL}}})
			v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
			want := Verdict{Decision: Deny, Ran: 1, Reasons: []Opinion{{
				Decision: Deny, Hook: "h", Reason: "hook h failed: " + tt.why, Failed: true,
			}}}
			if diff := cmp.Diff(want, v); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("connection refused", func(t *testing.T) {
		srv := newHookServer(t, `{"decision":"allow"}`)
		srv.Close()
		r := newRunner(t, Options{Hooks: []Hook{{Name: "h", URL: srv.URL + "/?token=s3cret", OnFailure: Ask}}})
		v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
		if v.Decision != Ask || len(v.Reasons) != 1 || v.Reasons[0].Reason != "hook h failed: request failed" || !v.Reasons[0].Failed {
			t.Errorf("verdict = %+v, want ask from a failed request", v)
		}
	})
}

// TestFailureLogThrottled: a hook that fails on every call is logged once
// an interval for each kind of failure, not once a call (an agent can make
// it fail on every call); the metric's OnResult still sees each.
func TestFailureLogThrottled(t *testing.T) {
	srv := newHookServer(t, `{}`)
	srv.Close()
	var log testkit.Buffer
	results := 0
	r := newRunner(t, Options{
		Hooks:    []Hook{{Name: "h", URL: srv.URL}},
		Logger:   slog.New(slog.NewJSONHandler(&log, nil)),
		OnResult: func(string, string, time.Duration) { results++ },
	})
	for range 20 {
		r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
	}
	if n := strings.Count(log.String(), `"msg":"hook failed"`); n != 1 || results != 20 {
		t.Errorf("20 failures: %d log lines and %d results, want 1 and 20\n%s", n, results, log.String())
	}
}

// TestFailureLogKeepsURLOut: the log of a failure names the hook, not its
// URL, which may carry a token.
func TestFailureLogKeepsURLOut(t *testing.T) {
	srv := newHookServer(t, `{}`)
	srv.Close()
	var log testkit.Buffer
	r := newRunner(t, Options{
		Hooks:  []Hook{{Name: "h", URL: srv.URL + "/?token=s3cret", Secret: "whsec_c2VjcmV0"}},
		Logger: slog.New(slog.NewJSONHandler(&log, nil)),
	})
	r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
	if !strings.Contains(log.String(), `"hook":"h"`) {
		t.Errorf("log %s does not name the hook", log.String())
	}
	if strings.Contains(log.String(), "s3cret") {
		t.Errorf("log %s repeats the URL's token", log.String())
	}
	var out strings.Builder
	slog.New(slog.NewJSONHandler(&out, nil)).Info("config", "hook", Hook{Name: "h", URL: "http://x/?token=s3cret", Secret: "c2VjcmV0"})
	if s := out.String(); strings.Contains(s, "s3cret") || strings.Contains(s, "c2VjcmV0") {
		t.Errorf("a logged Hook shows its URL or secret: %s", s)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			elsewhere := newHookServer(t, `{"decision":"allow"}`)
			srv := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL, code)
			})
			r := newRunner(t, Options{Hooks: []Hook{{Name: "h", URL: srv.URL, Secret: "s"}}})
			v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
			if v.Decision != Deny || len(v.Reasons) != 1 || !v.Reasons[0].Failed ||
				v.Reasons[0].Reason != "hook h failed: redirect not followed (status "+strconv.Itoa(code)+")" {
				t.Errorf("verdict = %+v, want a failure", v)
			}
			if n := len(elsewhere.Requests()); n != 0 {
				t.Errorf("the redirect target received %d requests", n)
			}
		})
	}
}

func TestUpdatedArguments(t *testing.T) {
	const rewrite = `{"decision":"allow","updated_arguments": {"env" : "staging", "note":"<moved>"}}`
	run := func(t *testing.T, answers ...string) Verdict {
		t.Helper()
		var hooks []Hook
		for i, a := range answers {
			hooks = append(hooks, Hook{Name: "h" + strconv.Itoa(i), URL: newHookServer(t, a).URL})
		}
		return newRunner(t, Options{Hooks: hooks}).Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
	}

	t.Run("one hook rewrites", func(t *testing.T) {
		v := run(t, `{"decision":"none"}`, rewrite)
		if v.Decision != Allow || v.UpdatedBy != "h1" {
			t.Errorf("Decision, UpdatedBy = %q, %q, want allow, h1", v.Decision, v.UpdatedBy)
		}
		// The hook's own bytes, compacted, not re-encoded (no \u003c).
		if got, want := string(v.UpdatedArguments), `{"env":"staging","note":"<moved>"}`; got != want {
			t.Errorf("UpdatedArguments = %s, want %s", got, want)
		}
		if got := string(v.Reasons[0].UpdatedArguments); got != string(v.UpdatedArguments) {
			t.Errorf("the opinion's UpdatedArguments = %s", got)
		}
	})
	t.Run("a hook answering none may rewrite", func(t *testing.T) {
		v := run(t, `{"decision":"none","updated_arguments":{"a":1}}`)
		if v.Decision != None || string(v.UpdatedArguments) != `{"a":1}` || v.UpdatedBy != "h0" {
			t.Errorf("verdict = %+v, want none with the rewrite", v)
		}
	})
	t.Run("a rewrite rides along with ask", func(t *testing.T) {
		v := run(t, rewrite, `{"decision":"ask"}`)
		if v.Decision != Ask || v.UpdatedBy != "h0" {
			t.Errorf("verdict = %+v, want ask with h0's rewrite", v)
		}
	})
	t.Run("a denying hook contributes no rewrite", func(t *testing.T) {
		v := run(t, `{"decision":"deny","updated_arguments":{"a":1}}`, `{"decision":"allow","updated_arguments":{"b":2}}`)
		if v.Decision != Deny || v.UpdatedArguments != nil || v.UpdatedBy != "" {
			t.Errorf("verdict = %+v, want deny without arguments", v)
		}
		if diff := cmp.Diff([]string{"h0"}, hookNames(v.Reasons)); diff != "" {
			t.Errorf("reasons (-want +got):\n%s (one rewrite is no conflict)", diff)
		}
		if v.Reasons[0].UpdatedArguments != nil {
			t.Errorf("the denying opinion keeps arguments %s", v.Reasons[0].UpdatedArguments)
		}
	})
	t.Run("a deny elsewhere drops the rewrite", func(t *testing.T) {
		v := run(t, rewrite, `{"decision":"deny"}`)
		if v.Decision != Deny || v.UpdatedArguments != nil {
			t.Errorf("verdict = %+v, want deny without arguments", v)
		}
	})
	t.Run("two rewrites deny", func(t *testing.T) {
		v := run(t, rewrite, `{"decision":"none"}`, `{"decision":"allow","updated_arguments":{"env":"staging","note":"<moved>"}}`)
		want := Verdict{Decision: Deny, Ran: 3, Reasons: []Opinion{{
			Decision: Deny, Hook: "h2",
			Reason: "hooks h0, h2 each rewrote the arguments; at most one hook may rewrite a call",
		}}}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Errorf("verdict (-want +got):\n%s", diff)
		}
	})
	t.Run("a failed hook contributes no rewrite", func(t *testing.T) {
		v := run(t, rewrite, `{"decision":"allow","updated_arguments":[1]}`)
		if v.Decision != Deny || v.UpdatedArguments != nil || len(v.Reasons) != 1 || !v.Reasons[0].Failed {
			t.Errorf("verdict = %+v, want deny from the failed hook alone", v)
		}
	})
}

// TestMaxInFlight: with every slot taken, a hook fails at once instead of
// waiting, and denies whatever its on_failure says: a flood of calls must
// not turn a hook into its on_failure answer.
func TestMaxInFlight(t *testing.T) {
	r, held, fast, release := heldAndQuick(t, 1, Ask)
	done := make(chan Verdict)
	go func() { done <- r.Run(context.Background(), "key:agent", "u", "slow", true, []byte(testInput)) }()
	testkit.WaitFor(t, "the held request", func() bool { return len(held.Requests()) == 1 })

	start := time.Now()
	v := r.Run(t.Context(), "key:other", "u", "quick", true, []byte(testInput))
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Run waited %v for a slot", d)
	}
	want := Verdict{Decision: Deny, Ran: 1, Reasons: []Opinion{{
		Decision: Deny, Hook: "fast", Reason: "hook fast failed: too many hook requests in flight", Failed: true,
	}}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	if n := len(fast.Requests()); n != 0 {
		t.Errorf("the hook over the limit received %d requests", n)
	}

	close(release)
	if v := <-done; v.Decision != Allow {
		t.Errorf("held call: Decision = %q, want allow", v.Decision)
	}
	// The slot is free again.
	if v := r.Run(t.Context(), "key:agent", "u", "quick", true, []byte(testInput)); v.Decision != Allow {
		t.Errorf("after release: Decision = %q (%+v), want allow", v.Decision, v.Reasons)
	}
}

// heldAndQuick is a runner with maxInFlight slots and two hooks: "held"
// on tool slow, whose requests wait for release to be closed, and "fast"
// on tool quick, answering allow at once, onFailure when it fails.
func heldAndQuick(t *testing.T, maxInFlight int, onFailure string) (r *Runner, held *testkit.Upstream, fast *testkit.Upstream, release chan struct{}) {
	release = make(chan struct{})
	held = testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})
	fast = newHookServer(t, `{"decision":"allow"}`)
	r = newRunner(t, Options{MaxInFlight: maxInFlight, Hooks: []Hook{
		{Name: "held", URL: held.URL, Tool: "slow"},
		{Name: "fast", URL: fast.URL, Tool: "quick", OnFailure: onFailure},
	}})
	return r, held, fast, release
}

// TestMaxInFlightPerCaller: a caller's share is a quarter of the slots, in
// calls; past it a caller's calls go on while fewer than half the slots are
// taken (a lone caller is not held to its share), and are denied at once
// after that (an on_failure of allow included), while another caller's
// calls are still asked.
func TestMaxInFlightPerCaller(t *testing.T) {
	r, held, fast, release := heldAndQuick(t, 8, Allow)
	const flood = 4 // its share, 8 / 4, and two more while half the slots are free
	done := make(chan Verdict, flood)
	for i := range flood {
		go func() { done <- r.Run(context.Background(), "key:flood", "u", "slow", true, []byte(testInput)) }()
		testkit.WaitFor(t, "the held requests", func() bool { return len(held.Requests()) == i+1 })
	}

	v := r.Run(t.Context(), "key:flood", "u", "quick", true, []byte(testInput))
	want := Verdict{Decision: Deny, Ran: 1, Reasons: []Opinion{{
		Decision: Deny, Hook: "fast", Reason: "hook fast failed: too many hook requests in flight for this caller", Failed: true,
	}}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("the flooding caller's next call, half the slots taken (-want +got):\n%s", diff)
	}
	if v := r.Run(t.Context(), "key:other", "u", "quick", true, []byte(testInput)); v.Decision != Allow || len(fast.Requests()) != 1 {
		t.Errorf("another caller: %q (%+v), %d requests to the hook; want allow, asked", v.Decision, v.Reasons, len(fast.Requests()))
	}
	close(release)
	for range flood {
		if v := <-done; v.Decision != Allow {
			t.Errorf("a held call of the flooding caller: %q (%+v), want allow", v.Decision, v.Reasons)
		}
	}
	if v := r.Run(t.Context(), "key:flood", "u", "quick", true, []byte(testInput)); v.Decision != Allow {
		t.Errorf("the flooding caller, its share free again: %q (%+v), want allow", v.Decision, v.Reasons)
	}
}

func TestOnResult(t *testing.T) {
	type result struct{ hook, outcome string }
	var mu sync.Mutex
	var got []result
	r := newRunner(t, Options{
		Hooks: []Hook{
			{Name: "a", URL: newHookServer(t, `{"decision":"allow"}`).URL},
			{Name: "b", URL: newHookServer(t, `{"decision":"none"}`).URL},
			{Name: "c", URL: newHookServer(t, `{"decision":"bogus"}`).URL, OnFailure: Allow},
			{Name: "d", URL: newHookServer(t, `{"decision":"ask"}`).URL, Tool: "other"},
		},
		OnResult: func(hook, outcome string, d time.Duration) {
			if d <= 0 {
				t.Errorf("OnResult(%s): duration %v", hook, d)
			}
			mu.Lock()
			got = append(got, result{hook, outcome})
			mu.Unlock()
		},
	})
	v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput))
	want := []result{{"a", Allow}, {"b", None}, {"c", Failure}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("OnResult calls (-want +got):\n%s", diff)
	}
	if v.Decision != Allow || len(v.Reasons) != 2 || !v.Reasons[1].Failed {
		t.Errorf("verdict = %+v, want allow from a and from c's failure", v)
	}
}

// TestCombineTable runs combine over opinions directly, for the cases the
// end-to-end tests do not reach.
func TestCombineTable(t *testing.T) {
	args := json.RawMessage(`{"a":1}`)
	tests := []struct {
		name string
		ops  []Opinion
		want Verdict
	}{
		{"nothing ran", nil, Verdict{Decision: None}},
		{
			"a failed deny and an allow",
			[]Opinion{{Decision: Deny, Hook: "a", Failed: true}, {Decision: Allow, Hook: "b"}},
			Verdict{Decision: Deny, Ran: 2, Reasons: []Opinion{{Decision: Deny, Hook: "a", Failed: true}}},
		},
		{"two rewrites next to a deny", []Opinion{
			{Decision: Allow, Hook: "a", UpdatedArguments: args},
			{Decision: Deny, Hook: "b", Reason: "no"},
			{Decision: Ask, Hook: "c", UpdatedArguments: args},
		}, Verdict{Decision: Deny, Ran: 3, Reasons: []Opinion{
			{Decision: Deny, Hook: "b", Reason: "no"},
			{Decision: Deny, Hook: "c", Reason: "hooks a, c each rewrote the arguments; at most one hook may rewrite a call"},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, combine(tt.ops)); diff != "" {
				t.Errorf("combine (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoneCallerNotHeldToItsShare: one principal (a sidecar's usual one, or
// every anonymous caller) with as many calls asking hooks as its share (64
// of 256) or more is not denied while half the slots are free: 60 calls at
// once, each asking two hooks, are all asked and allowed.
func TestLoneCallerNotHeldToItsShare(t *testing.T) {
	release := make(chan struct{})
	slow := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})
	r := newRunner(t, Options{Hooks: []Hook{
		{Name: "a", URL: slow.URL, OnFailure: Allow},
		{Name: "b", URL: slow.URL, OnFailure: Allow},
	}})
	const calls = 60 // 120 requests: under half of 256
	done := make(chan Verdict, calls)
	for range calls {
		go func() { done <- r.Run(context.Background(), "anonymous", "u", "t", true, []byte(testInput)) }()
	}
	testkit.WaitFor(t, "every hook request", func() bool { return len(slow.Requests()) == 2*calls })
	close(release)
	for range calls {
		if v := <-done; v.Decision != Allow {
			t.Fatalf("a call: %q (%+v), want allow", v.Decision, v.Reasons)
		}
	}
}

// TestFlooderOfManyHooksLeavesOthersRoom: a share counts slots, one a hook
// a call asks: a principal whose tool asks four hooks holds at most half
// the slots, and another principal's call is still asked.
func TestFlooderOfManyHooksLeavesOthersRoom(t *testing.T) {
	release := make(chan struct{})
	held := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})
	fast := newHookServer(t, `{"decision":"allow"}`)
	r := newRunner(t, Options{Hooks: []Hook{ // MaxInFlight: default 256
		{Name: "h1", URL: held.URL, Tool: "slow"},
		{Name: "h2", URL: held.URL, Tool: "slow"},
		{Name: "h3", URL: held.URL, Tool: "slow"},
		{Name: "h4", URL: held.URL, Tool: "slow"},
		{Name: "fast", URL: fast.URL, Tool: "quick", OnFailure: Deny},
	}})
	const calls = DefaultMaxInFlight / 4 // 256 slots' worth of four-hook calls
	done := make(chan Verdict, calls)
	for range calls {
		go func() { done <- r.Run(context.Background(), "key:flood", "u", "slow", true, []byte(testInput)) }()
	}
	// Half the slots, 32 calls, are asked; the others are refused at once.
	testkit.WaitFor(t, "the flooder's hook requests", func() bool { return len(held.Requests())+4*len(done) == 4*calls })
	v := r.Run(t.Context(), "key:victim", "u", "quick", true, []byte(testInput))
	close(release)
	for range calls {
		<-done
	}
	if n := len(held.Requests()); n > DefaultMaxInFlight/2 {
		t.Errorf("the flooder held %d slots, want at most half of %d", n, DefaultMaxInFlight)
	}
	if v.Decision != Allow || len(fast.Requests()) != 1 {
		t.Errorf("another principal's call while the flooder keeps to its share of calls: %q (%+v), %d requests to its hook; want allow, asked", v.Decision, v.Reasons, len(fast.Requests()))
	}
}

// TestBurstBorrowsNoMoreThanHalf: a burst of one principal's calls, all at
// once on an empty pool, takes at most half the slots (the check and the
// taking are one step), and another principal's call is still asked.
func TestBurstBorrowsNoMoreThanHalf(t *testing.T) {
	release := make(chan struct{})
	held := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})
	fast := newHookServer(t, `{"decision":"allow"}`)
	r := newRunner(t, Options{Hooks: []Hook{
		{Name: "held", URL: held.URL, Tool: "slow", OnFailure: Allow},
		{Name: "fast", URL: fast.URL, Tool: "quick", OnFailure: Deny},
	}})
	const burst = DefaultMaxInFlight
	start := make(chan struct{})
	done := make(chan Verdict, burst)
	for range burst {
		go func() {
			<-start
			done <- r.Run(context.Background(), "key:flood", "u", "slow", true, []byte(testInput))
		}()
	}
	close(start)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && len(held.Requests())+len(done) < burst {
		time.Sleep(10 * time.Millisecond)
	}
	got := len(held.Requests())
	v := r.Run(t.Context(), "key:victim", "u", "quick", true, []byte(testInput))
	close(release)
	for range burst {
		<-done
	}
	if got > DefaultMaxInFlight/2 {
		t.Errorf("one principal's burst holds %d of %d slots, want at most half", got, DefaultMaxInFlight)
	}
	if v.Decision != Allow {
		t.Errorf("another principal's call during the burst: %q (%+v), want allow", v.Decision, v.Reasons)
	}
}

// TestCallOfManyHooksRuns: a call that asks more hooks than a principal's
// share and half the slots (3 of 4 here) still runs on an idle pool.
func TestCallOfManyHooksRuns(t *testing.T) {
	ok := newHookServer(t, `{"decision":"allow"}`)
	r := newRunner(t, Options{MaxInFlight: 4, Hooks: []Hook{
		{Name: "a", URL: ok.URL, OnFailure: Deny},
		{Name: "b", URL: ok.URL, OnFailure: Deny},
		{Name: "c", URL: ok.URL, OnFailure: Deny},
	}})
	if v := r.Run(t.Context(), "key:agent", "u", "t", true, []byte(testInput)); v.Decision != Allow || len(ok.Requests()) != 3 {
		t.Errorf("a call of three hooks on an idle pool of four: %q (%+v), %d requests; want allow, all asked", v.Decision, v.Reasons, len(ok.Requests()))
	}
}

// TestShareUnderLoadForACallOfSomeHooks: a principal holding nothing keeps
// to its share under load for a call of more hooks than its share but not
// more than half the slots (3 of 8, its share 2, 5 slots taken): refused,
// while another principal's call is still asked.
func TestShareUnderLoadForACallOfSomeHooks(t *testing.T) {
	release := make(chan struct{})
	held := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})
	fast := newHookServer(t, `{"decision":"allow"}`)
	r := newRunner(t, Options{MaxInFlight: 8, Hooks: []Hook{
		{Name: "held", URL: held.URL, Tool: "slow"},
		{Name: "a", URL: fast.URL, Tool: "big"},
		{Name: "b", URL: fast.URL, Tool: "big"},
		{Name: "c", URL: fast.URL, Tool: "big"},
		{Name: "one", URL: fast.URL, Tool: "quick"},
	}})
	done := make(chan Verdict, 5)
	for i := range 5 { // five callers, one slot each
		go func() {
			done <- r.Run(context.Background(), fmt.Sprintf("key:c%d", i), "u", "slow", true, []byte(testInput))
		}()
		testkit.WaitFor(t, "the held requests", func() bool { return len(held.Requests()) == i+1 })
	}
	if v := r.Run(t.Context(), "key:x", "u", "big", true, []byte(testInput)); v.Decision != Deny {
		t.Errorf("a three-hook call past its principal's share under load: %q (%+v), want deny", v.Decision, v.Reasons)
	}
	if v := r.Run(t.Context(), "key:y", "u", "quick", true, []byte(testInput)); v.Decision != Allow {
		t.Errorf("another principal's one-hook call: %q (%+v), want allow", v.Decision, v.Reasons)
	}
	close(release)
	for range 5 {
		<-done
	}
}
