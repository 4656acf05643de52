package approvals

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// inboxEnv is a Handler with trusted-header identity on a memory store,
// on a clock that moves only when the test says so.
type inboxEnv struct {
	t     *testing.T
	h     *Handler
	store *pending.MemoryStore
	clock *testkit.Clock
}

func newInboxEnv(t *testing.T) *inboxEnv {
	t.Helper()
	clock := testkit.NewClock(viewNow)
	store := pending.NewMemory(pending.Options{Now: clock.Now})
	signer, err := NewSigner([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	id, err := signin.New(signin.Config{Type: signin.TypeTrustedHeader, Header: signin.HeaderConfig{
		UserHeader: "X-User", GroupsHeader: "X-Groups", SecretHeader: "X-Proxy-Secret", Secret: "inbox-proxy-secret-0123456789",
	}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Store: store, Signer: signer, Identity: id, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &inboxEnv{t: t, h: h, store: store, clock: clock}
}

// park parks a call as the proxy does, with a Brief (brief false: with
// its Info only, as before calls had one).
func (e *inboxEnv) park(tool string, brief bool, approvers ...callinfo.Approvers) pending.Call {
	e.t.Helper()
	info := callinfo.Info{
		Kind: "rest", Tool: tool, Upstream: "notes", Subject: "agent-42", Target: "notes/" + tool,
		Reasons: []string{"writes need approval"}, Method: "POST", Path: "/tools/" + tool, Approvers: approvers,
	}
	var quorum []int
	for _, a := range approvers {
		quorum = append(quorum, a.Min)
	}
	c := pending.Call{
		ID: rand.Text(), Subject: "agent-42", Upstream: "notes", Tool: tool,
		Request: []byte("POST /tools/" + tool), RequestDigest: rand.Text(), Info: info.Encode(), Quorum: quorum,
	}
	if brief {
		c.Brief = callinfo.BriefOf(info)
	}
	c, _, err := e.store.Park(context.Background(), c, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

var inboxLink = regexp.MustCompile(`<a href="\./approvals/([^"]+)">`)

// inbox returns the IDs the inbox of user (in groups) lists, in order.
func (e *inboxEnv) inbox(user string, groups ...string) []string {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/approvals", nil)
	req.Header.Set("X-User", user)
	req.Header.Set("X-Groups", strings.Join(groups, ","))
	req.Header.Set("X-Proxy-Secret", "inbox-proxy-secret-0123456789")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		e.t.Fatalf("GET /approvals: %d\n%s", rec.Code, rec.Body)
	}
	var ids []string
	for _, m := range inboxLink.FindAllStringSubmatch(rec.Body.String(), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestInboxNewestFirstBeyondScan: with more calls waiting than one inbox
// reads, the newest are listed, newest first.
func TestInboxNewestFirstBeyondScan(t *testing.T) {
	e := newInboxEnv(t)
	var parked []string // oldest first
	for i := range inboxScan + 20 {
		parked = append(parked, e.park(fmt.Sprintf("tool_%04d", i), true).ID)
		e.clock.Advance(time.Second)
	}
	got := e.inbox("dana", "sre")
	want := slices.Clone(parked[20:])
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Errorf("the inbox lists %d calls starting %v, want the %d newest, newest first, starting %v",
			len(got), got[:min(3, len(got))], len(want), want[:3])
	}
}

// TestInboxEligibilityFromBrief: who sees a call in the inbox is decided
// by the approvers in its Brief, or in its Info for a call parked without
// a Brief.
func TestInboxEligibilityFromBrief(t *testing.T) {
	e := newInboxEnv(t)
	sre := callinfo.Approvers{Groups: []string{"sre"}, Min: 1}
	finance := callinfo.Approvers{Groups: []string{"finance"}, Min: 1}
	mine := e.park("mine", true, sre)
	other := e.park("other", true, finance)
	open := e.park("open", true)
	e.clock.Advance(time.Second)
	oldMine := e.park("old_mine", false, sre)
	oldOther := e.park("old_other", false, finance)
	got := e.inbox("dana", "sre")
	if len(got) != 3 || got[0] != oldMine.ID || !slices.Contains(got, mine.ID) || !slices.Contains(got, open.ID) {
		t.Errorf("dana (sre) sees %v, want old_mine %s first, then mine %s and open %s", got, oldMine.ID, mine.ID, open.ID)
	}
	for _, c := range []pending.Call{other, oldOther} {
		if slices.Contains(got, c.ID) {
			t.Errorf("dana (sre) sees %s, a call for finance", c.Tool)
		}
	}
	if got := e.inbox("frank", "finance"); len(got) != 3 || !slices.Contains(got, other.ID) || !slices.Contains(got, oldOther.ID) || !slices.Contains(got, open.ID) {
		t.Errorf("frank (finance) sees %v, want other, old_other and open", got)
	}
}
