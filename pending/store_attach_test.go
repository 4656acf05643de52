package pending

import (
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testAttachKeys checks the two attach keys of a call: a call parked with
// an explicit key (AttachKey) is found by a retry without it, whose
// AttachKey is the call's ArgsKey; only the retry's AttachKey is looked up;
// and a delivery forgets both keys.
func testAttachKeys(t *testing.T, newStore newStoreFunc) {
	// keyed returns a call parked with the explicit key idem, its ArgsKey
	// args; keyless a retry of it without the key.
	keyed := func(idem, args string) Call {
		c := sampleCall()
		c.AttachKey, c.ArgsKey = idem, args
		return c
	}
	keyless := func(args string) Call { return keyed(args, args) }
	// Attaches says beforehand what Park does: the same call, or none.
	attaches := func(t *testing.T, s Store, c Call, to string) {
		t.Helper()
		if got, err := s.Attaches(t.Context(), c); err != nil || got.ID != to {
			t.Errorf("Attaches(AttachKey %s) = %s, %v; want %s", c.AttachKey, got.ID, err, to)
		}
		got, attached, err := s.Park(t.Context(), c, long)
		if err != nil || !attached || got.ID != to {
			t.Fatalf("Park(AttachKey %s) = %s, attached %v, %v; want attached to %s", c.AttachKey, got.ID, attached, err, to)
		}
		if _, err := s.Get(t.Context(), c.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(attached retry's own ID) = %v, want ErrNotFound (nothing stored)", err)
		}
	}
	parksNew := func(t *testing.T, s Store, c Call) {
		t.Helper()
		if got, err := s.Attaches(t.Context(), c); !errors.Is(err, ErrNotFound) {
			t.Errorf("Attaches(AttachKey %s) = %s, %v; want ErrNotFound", c.AttachKey, got.ID, err)
		}
		got, attached, err := s.Park(t.Context(), c, long)
		if err != nil || attached || got.ID != c.ID {
			t.Fatalf("Park(AttachKey %s) = %s, attached %v, %v; want the new call %s", c.AttachKey, got.ID, attached, err, c.ID)
		}
	}

	t.Run("keyless retry finds a keyed call", func(t *testing.T) {
		s, _ := newStore(t)
		idem, args := "idem-"+rand.Text(), "args-"+rand.Text()
		first := keyed(idem, args)
		parksNew(t, s, first)
		attaches(t, s, keyless(args), first.ID)
		attaches(t, s, keyed(idem, args), first.ID)

		// Rejected: both keys still find it, until the rejection is
		// delivered; then both are forgotten.
		if _, err := s.Decide(t.Context(), first.ID, Decision{To: Rejected, By: "bob", Comment: "no"}); err != nil {
			t.Fatal(err)
		}
		attaches(t, s, keyless(args), first.ID)
		attaches(t, s, keyed(idem, args), first.ID)
		if ok, _, err := s.Deliver(t.Context(), first.ID); err != nil || !ok {
			t.Fatalf("Deliver = %v, %v; want first", ok, err)
		}
		second := keyed(idem, args)
		parksNew(t, s, second)
		// The new call took the arguments' key too.
		attaches(t, s, keyless(args), second.ID)
	})

	t.Run("FinishDeliver", func(t *testing.T) {
		// The executor that holds its caller's request records the result
		// and takes it in one step: delivered, both keys forgotten, and
		// no other request takes it again.
		s, _ := newStore(t)
		ctx := t.Context()
		idem, args := "idem-"+rand.Text(), "args-"+rand.Text()
		first := keyed(idem, args)
		parksNew(t, s, first)
		decide(t, s, first.ID, Approved)
		c, err := s.Claim(ctx, first.ID, long)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishDeliver(ctx, c.ID, c.Fence+1, Executed, Result{Status: 200}); !errors.Is(err, ErrFenced) {
			t.Fatalf("FinishDeliver(stale fence) = %v, want ErrFenced", err)
		}
		attaches(t, s, keyless(args), first.ID) // still executing: a retry attaches
		done, err := s.FinishDeliver(ctx, c.ID, c.Fence, Executed, Result{Status: 201, Body: []byte("made")})
		if err != nil || done.State != Executed || !done.Delivered || done.Result == nil || string(done.Result.Body) != "made" {
			t.Fatalf("FinishDeliver = %+v, %v; want executed, delivered, with its result", done, err)
		}
		if got, err := s.Get(ctx, c.ID); err != nil || !got.Delivered || got.State != Executed {
			t.Errorf("Get after FinishDeliver = %s delivered %v, %v", got.State, got.Delivered, err)
		} else if diff := cmp.Diff(finished(got), done); diff != "" {
			t.Errorf("FinishDeliver returned (-get +finish):\n%s", diff)
		}
		if first, _, err := s.Deliver(ctx, c.ID); err != nil || first {
			t.Errorf("Deliver after FinishDeliver = %v, %v; want not first", first, err)
		}
		// both keys forgotten: a retry with either is a new call
		parksNew(t, s, keyless(args))
		parksNew(t, s, keyed(idem, args))
	})

	t.Run("a key is looked up alone", func(t *testing.T) {
		s, _ := newStore(t)
		args := "args-" + rand.Text()
		first := keyed("idem-"+rand.Text(), args)
		parksNew(t, s, first)
		// Another explicit key with the same arguments is another call:
		// the retry's AttachKey is the only key looked up.
		other := keyed("idem-"+rand.Text(), args)
		parksNew(t, s, other)
		attaches(t, s, keyed(other.AttachKey, args), other.ID)
		// The arguments' key still names the first identical call.
		attaches(t, s, keyless(args), first.ID)
	})

	t.Run("keyless first, then keyed", func(t *testing.T) {
		s, _ := newStore(t)
		args := "args-" + rand.Text()
		first := keyless(args)
		parksNew(t, s, first)
		withKey := keyed("idem-"+rand.Text(), args)
		parksNew(t, s, withKey)
		attaches(t, s, keyless(args), first.ID)
		attaches(t, s, keyed(withKey.AttachKey, args), withKey.ID)
	})

	t.Run("an executor's lease that ran out", func(t *testing.T) {
		// Unknown once its lease is over: a retry parks anew. Attaches
		// may still name the call (the Redis store judges by Redis'
		// clock only when it parks), which makes a granted call ask:
		// never the other way round.
		s, advance := newStore(t)
		args := "args-" + rand.Text()
		first := keyless(args)
		parksNew(t, s, first)
		decide(t, s, first.ID, Approved)
		if _, err := s.Claim(t.Context(), first.ID, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		advance(100 * time.Millisecond)
		retry := keyless(args)
		if got, err := s.Attaches(t.Context(), retry); err != nil && !errors.Is(err, ErrNotFound) || err == nil && got.ID != first.ID {
			t.Errorf("Attaches = %s, %v; want the first call or none", got.ID, err)
		}
		if got, attached, err := s.Park(t.Context(), retry, long); err != nil || attached || got.ID != retry.ID {
			t.Errorf("Park = %s, attached %v, %v; want the retry parked anew", got.ID, attached, err)
		}
	})
	t.Run("an executing call", func(t *testing.T) {
		// Within its lease: a retry attaches, and Attaches names it.
		s, _ := newStore(t)
		args := "args-" + rand.Text()
		first := keyless(args)
		parksNew(t, s, first)
		decide(t, s, first.ID, Approved)
		if _, err := s.Claim(t.Context(), first.ID, long); err != nil {
			t.Fatal(err)
		}
		attaches(t, s, keyless(args), first.ID)
	})

	t.Run("cancelled forgets both keys", func(t *testing.T) {
		s, _ := newStore(t)
		idem, args := "idem-"+rand.Text(), "args-"+rand.Text()
		first := keyed(idem, args)
		parksNew(t, s, first)
		if _, err := s.Cancel(t.Context(), first.ID); err != nil {
			t.Fatal(err)
		}
		parksNew(t, s, keyless(args))
		parksNew(t, s, keyed(idem, args))
	})
}

// testDeliverRace: a rejected call with retries racing to attach to it and
// take its refusal. Exactly one Deliver is first; every retry either
// attached to the rejected call or parked (or attached to) one new call.
func testDeliverRace(t *testing.T, newStore newStoreFunc) {
	const n = 16
	s, _ := newStore(t)
	ctx := t.Context()
	for round := range 8 {
		c := sampleCall()
		c.AttachKey = "key-" + rand.Text()
		c = park(t, s, c, long)
		decide(t, s, c.ID, Rejected)

		type outcome struct {
			id       string
			attached bool
			first    bool
		}
		outs := make([]outcome, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				r := sampleCall()
				r.AttachKey = c.AttachKey
				got, attached, err := s.Park(ctx, r, long)
				if err != nil {
					t.Errorf("round %d: Park = %v", round, err)
					return
				}
				o := outcome{id: got.ID, attached: attached}
				if attached && got.ID == c.ID {
					first, _, err := s.Deliver(ctx, c.ID)
					if err != nil {
						t.Errorf("round %d: Deliver = %v", round, err)
					}
					o.first = first
				}
				outs[i] = o
			})
		}
		close(start)
		wg.Wait()

		firsts, others := 0, map[string]bool{}
		for _, o := range outs {
			if o.first {
				firsts++
			}
			if o.id != c.ID {
				others[o.id] = true
			}
		}
		if firsts != 1 {
			t.Errorf("round %d: %d retries took the refusal first, want exactly 1", round, firsts)
		}
		if len(others) > 1 {
			t.Errorf("round %d: retries parked %d new calls, want at most 1 (later ones attach)", round, len(others))
		}
		for id := range others {
			if got := get(t, s, id); got.State != Waiting {
				t.Errorf("round %d: the new call is %s, want waiting", round, got.State)
			}
		}
		if got := get(t, s, c.ID); !got.Delivered || got.State != Rejected {
			t.Errorf("round %d: the rejected call is %s, delivered %v", round, got.State, got.Delivered)
		}
	}
}
