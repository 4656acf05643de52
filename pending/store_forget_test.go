package pending

import (
	"bytes"
	"testing"
)

// testForgetsRequest: every way into a terminal state drops the stored
// request (Call.Request), which may carry the upstream's credentials,
// and keeps its digest and what approvers read (Info, Brief). A call
// still to be sent keeps it.
func testForgetsRequest(t *testing.T, newStore newStoreFunc) {
	s, advance := newStore(t)
	ctx := t.Context()
	want := sampleCall()
	res := Result{Status: 200, Body: []byte("ok")}
	ends := map[string]func() string{
		"rejected": func() string {
			c := park(t, s, sampleCall(), long)
			decide(t, s, c.ID, Rejected)
			return c.ID
		},
		"cancelled": func() string {
			c := park(t, s, sampleCall(), long)
			if _, err := s.Cancel(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
			return c.ID
		},
		"executed": func() string {
			c := claimed(t, s, long)
			if _, err := s.Finish(ctx, c.ID, c.Fence, Executed, res); err != nil {
				t.Fatal(err)
			}
			return c.ID
		},
		"executed and delivered": func() string {
			c := claimed(t, s, long)
			got, err := s.FinishDeliver(ctx, c.ID, c.Fence, Executed, res)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Request) != 0 {
				t.Errorf("FinishDeliver replied with the request")
			}
			return c.ID
		},
	}
	// Still to be sent: waiting, approved, executing.
	waiting := park(t, s, sampleCall(), short)
	approvedCall := park(t, s, sampleCall(), long)
	decide(t, s, approvedCall.ID, Approved)
	executing := claimed(t, s, long)
	for _, id := range []string{waiting.ID, approvedCall.ID, executing.ID} {
		if got := get(t, s, id); !bytes.Equal(got.Request, want.Request) {
			t.Errorf("%s call lost its request", got.State)
		}
	}
	ids := map[string]string{}
	for name, end := range ends {
		ids[name] = end()
	}
	advance(beyond)
	if _, err := s.Expire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	ids["expired"] = waiting.ID
	for name, id := range ids {
		got := get(t, s, id)
		if !got.State.Terminal() {
			t.Fatalf("%s: state %s", name, got.State)
		}
		if len(got.Request) != 0 {
			t.Errorf("%s: the stored request is kept (%d bytes)", name, len(got.Request))
		}
		if got.RequestDigest != want.RequestDigest || !bytes.Equal(got.Info, want.Info) || !bytes.Equal(got.Brief, want.Brief) {
			t.Errorf("%s: digest, info or brief changed", name)
		}
	}
}
