package notify

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestResolvedBeforeSentSkipsBoth: while a slow receiver takes one message,
// calls park and are cancelled behind it. Each call's requested event is
// still queued when its resolved event comes: the target is sent neither
// (it never heard of the call), both settle, and a call resolved after its
// requested event went out gets its resolved event as ever.
func TestResolvedBeforeSentSkipsBoth(t *testing.T) {
	release, open := releaser(t)
	entered := make(chan struct{})
	rc := testkit.NewUpstream(t, func(n int, _ http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			close(entered)
			<-release // the first message takes long: the rest queue
		}
	})
	var res results
	var set settled
	opts := fast(&res, Target{URL: rc.URL, Lanes: 1})
	opts.OnSettled = set.record
	n := start(t, opts)

	n.Notify(requested("first"))
	<-entered // the first message is in delivery
	const rounds = 50
	for i := range rounds {
		id := "flood-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		n.Notify(requested(id))
		n.Notify(resolved(id, "cancelled", "agent-42"))
	}
	open()
	n.Notify(resolved("first", "rejected", "alice"))
	testkit.WaitFor(t, "every event settled", func() bool { return n.Pending() == 0 })

	var got []string
	for _, r := range rc.Requests() {
		ev := decode(t, r.Body)
		got = append(got, ev["id"].(string))
	}
	if want := []string{"first", "first.resolved"}; !slices.Equal(got, want) {
		t.Errorf("the receiver got %d messages %v, want %v: the flood's calls were resolved before their turn", len(got), got, want)
	}
	if s := res.count(ResultSkipped); s != 2*rounds {
		t.Errorf("%d events counted skipped, want %d", s, 2*rounds)
	}
	calls := set.get()
	for id, settlements := range calls {
		if strings.HasPrefix(id, "flood-") && !slices.Equal(settlements, []bool{true, true}) {
			t.Errorf("call %s settled %v, want both its events, as delivered", id, settlements)
		}
	}
	if len(calls) != rounds+1 {
		t.Errorf("%d calls settled, want %d", len(calls), rounds+1)
	}
}
