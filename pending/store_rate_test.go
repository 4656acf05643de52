package pending

import (
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"
)

// parkRate sets Options.ParkEvery and Options.ParkBurst.
func parkRate(every time.Duration, burst int) func(*Options) {
	return func(o *Options) { o.ParkEvery, o.ParkBurst = every, burst }
}

// testRate checks Options.ParkEvery and ParkBurst: a principal parks
// ParkBurst new calls at once, then one per ParkEvery; past that a new
// call is refused with a *RateError that says when the next one would be
// let in, and nothing is stored. Attaching, and parking the same request
// again, are always allowed; other principals and calls without one are
// not touched; ending a call gives no place back (a rate is not a cap).
// Part of testStore.
func testRate(t *testing.T, newStore newStoreFunc) {
	const alice, bob = "key:alice", "key:bob"
	s, advance := newStore(t, parkRate(short, 2))
	ctx := t.Context()
	as := func(principal string) Call { return asPrincipal(sampleCall(), principal) }
	// refused checks that principal cannot park a new call now.
	refused := func(t *testing.T, principal string) {
		t.Helper()
		c := as(principal)
		got, attached, err := s.Park(ctx, c, long)
		var re *RateError
		if !errors.As(err, &re) || !errors.Is(err, ErrTooMany) || attached || got.ID != "" {
			t.Fatalf("Park(%q) past its rate = %s, attached %v, %v; want a *RateError and nothing", principal, got.ID, attached, err)
		}
		if re.RetryAfter <= 0 || re.RetryAfter > short {
			t.Errorf("RetryAfter = %v, want within (0, %v]", re.RetryAfter, short)
		}
		if re.Principal != principal || re.Burst != 2 || re.Every != short {
			t.Errorf("RateError = %+v, want principal %q, burst 2, every %v", re, principal, short)
		}
		if _, err := s.Get(ctx, c.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(refused call) = %v, want ErrNotFound", err)
		}
	}

	first := as(alice)
	first.AttachKey = "key-" + rand.Text()
	first = park(t, s, first, long)
	park(t, s, as(alice), long)
	refused(t, alice)

	// A retry attaches, and the same request parked again is answered as
	// before, whatever the rate.
	retry := as(alice)
	retry.AttachKey = first.AttachKey
	if got, attached, err := s.Park(ctx, retry, long); err != nil || !attached || got.ID != first.ID {
		t.Errorf("Park(retry past the rate) = %s, attached %v, %v; want attached to %s", got.ID, attached, err, first.ID)
	}
	if got, attached, err := s.Park(ctx, first, long); err != nil || attached || got.ID != first.ID {
		t.Errorf("Park(same request again past the rate) = %s, attached %v, %v; want the stored call", got.ID, attached, err)
	}
	// Other principals, and calls without one, have rates of their own.
	park(t, s, as(bob), long)
	for range 4 {
		park(t, s, as(""), long)
	}
	// Ending a call is no new place.
	if _, err := s.Cancel(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	refused(t, alice)

	// One ParkEvery later (and a little), one more new call is let in, not two.
	advance(beyond)
	park(t, s, as(alice), long)
	refused(t, alice)
}

// testRateRace checks that the rate is exact under concurrency: 20 new
// calls of one principal parked at once, with a burst of 5, park 5.
func testRateRace(t *testing.T, newStore newStoreFunc) {
	s, _ := newStore(t, parkRate(10*time.Second, 5)) // the test takes milliseconds
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, rate int
	)
	for range 20 {
		wg.Go(func() {
			_, _, err := s.Park(t.Context(), asPrincipal(sampleCall(), "key:alice"), long)
			var re *RateError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.As(err, &re):
				rate++
			default:
				t.Errorf("Park = %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 5 || rate != 15 {
		t.Errorf("20 concurrent parks with a burst of 5: %d parked, %d refused by the rate; want 5 and 15", ok, rate)
	}
}
