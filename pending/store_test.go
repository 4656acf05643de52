package pending

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// contractResultTTL is the ResultTTL that newStore must give the stores it
// makes for testStore and testStoreRace: the retention case waits for it.
const contractResultTTL = 2 * time.Second

// Durations of the contract. They are short enough for a store whose
// advance really sleeps (RedisStore), and every deadline is crossed with
// some margin, since such a store's clock is not the test's.
const (
	long   = time.Hour              // nothing expires during a case
	short  = 300 * time.Millisecond // ttl, lease or grace that a case lets pass
	beyond = short + 150*time.Millisecond
	slack  = 2 * time.Second // how far a store's "now" may be from time.Now
)

// newStoreFunc returns a fresh, empty store with ResultTTL
// contractResultTTL and the options set by each of with, and a function
// that lets d pass on the store's clock: for MemoryStore it moves its
// clock, for RedisStore it sleeps.
type newStoreFunc func(t *testing.T, with ...func(*Options)) (Store, func(d time.Duration))

// contractOptions returns the options of a contract store: ResultTTL
// contractResultTTL, then what each of with sets.
func contractOptions(with []func(*Options)) Options {
	o := Options{ResultTTL: contractResultTTL}
	for _, f := range with {
		f(&o)
	}
	return o
}

// approvedWindow sets Options.ApprovedWindow.
func approvedWindow(d time.Duration) func(*Options) {
	return func(o *Options) { o.ApprovedWindow = d }
}

// caps sets Options.MaxParked and Options.MaxParkedPerPrincipal.
func caps(all, perPrincipal int) func(*Options) {
	return func(o *Options) { o.MaxParked, o.MaxParkedPerPrincipal = all, perPrincipal }
}

// testStore checks the promises of the Store interface; every store must
// pass it. The concurrent half of the contract is testStoreRace, called by
// its own top-level tests so that -run Race selects it.
func testStore(t *testing.T, newStore newStoreFunc) {
	t.Run("GetMissing", func(t *testing.T) {
		s, _ := newStore(t)
		_, err := s.Get(t.Context(), "no-such-call")
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(missing) = %v, want ErrNotFound", err)
		}
	})

	// A new call whose ArgsKey names another call past its deadline leaves
	// that call as it stands: its end is Expire's to report.
	t.Run("ParkLeavesAnOverdueCallNamedByItsArgsKey", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		c := sampleCall()
		c.AttachKey = c.ArgsKey
		c = park(t, s, c, short)
		advance(beyond)
		n := sampleCall()
		n.AttachKey = "idem-" + n.ID // an Idempotency-Key: looked up alone
		n.ArgsKey = c.ArgsKey
		park(t, s, n, long)
		if st := get(t, s, c.ID).State; st != Waiting {
			t.Errorf("the overdue call named by the new call's ArgsKey is %s, want waiting until Expire", st)
		}
		if ended, err := s.Expire(ctx, 100); err != nil || len(ended) != 1 || ended[0].ID != c.ID {
			t.Errorf("Expire = %v, %v; want the overdue call, reported once", ended, err)
		}
	})

	t.Run("ParkRoundTrip", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		in := sampleCall()
		// Fields set by the store are ignored by Park.
		in.State, in.DecidedBy, in.Comment, in.DecidedAt = Executed, "x", "y", time.Now()
		in.Fence, in.LeaseUntil, in.Delivered = 9, time.Now(), true
		in.Result = &Result{Status: 200}
		in.CreatedAt, in.ExpiresAt = time.Unix(1, 0), time.Unix(2, 0)
		req, info, brief := in.Request, in.Info, in.Brief

		stored, attached, err := s.Park(ctx, in, time.Minute)
		if err != nil || attached {
			t.Fatalf("Park = attached %v, %v; want a new call", attached, err)
		}
		// the store must not keep the caller's slices
		req[0], info[0], brief[0] = 'X', 'X', 'X'

		want := sampleCall()
		want.ID, want.ArgsKey = in.ID, in.ArgsKey
		want.State = Waiting
		want.CreatedAt = time.Now()
		want.ExpiresAt = want.CreatedAt.Add(time.Minute)
		if diff := cmp.Diff(want, stored, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(slack)); diff != "" {
			t.Errorf("Park stored (-want +got):\n%s", diff)
		}
		if d := stored.ExpiresAt.Sub(stored.CreatedAt); d != time.Minute {
			t.Errorf("ExpiresAt - CreatedAt = %v, want the ttl %v", d, time.Minute)
		}
		got, err := s.Get(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(stored, got); diff != "" {
			t.Errorf("Get after Park (-park +get):\n%s", diff)
		}
	})

	// The call Park returns is the call as stored, field for field,
	// whatever the fields hold: digests as the proxy makes them, an
	// Idempotency-Key's or not, a quorum, fields left empty.
	t.Run("ParkReturnsTheStoredCall", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		hex := func() string { return fmt.Sprintf("%x", [32]byte([]byte(rand.Text()+rand.Text()))) }
		keyed := sampleCall()
		keyed.AttachKey, keyed.ArgsKey, keyed.ArgsDigest, keyed.RequestDigest = hex(), hex(), hex(), hex()
		keyed.Quorum = []int{2, 1}
		keyless := sampleCall()
		keyless.ArgsKey = hex()
		keyless.AttachKey = keyless.ArgsKey
		bare := Call{ID: "call-" + rand.Text(), Request: []byte{}, Info: []byte{}, Quorum: []int{}}
		for _, in := range []Call{keyed, keyless, bare} {
			stored, attached, err := s.Park(ctx, in, time.Minute)
			if err != nil || attached {
				t.Fatalf("Park = attached %v, %v; want a new call", attached, err)
			}
			if diff := cmp.Diff(get(t, s, in.ID), stored, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Park returned (-get +park):\n%s", diff)
			}
		}
	})

	// What a caller hands the store, and what it may change in a call it
	// got back (all but the byte slices, see Store), stays the caller's.
	t.Run("CallerCopies", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		in := sampleCall()
		p := park(t, s, in, long)
		in.Request[0], in.Info[0], in.Brief[0] = 'X', 'X', 'X'
		if _, err := s.Decide(ctx, p.ID, Decision{To: Approved, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		c, err := s.Claim(ctx, p.ID, long)
		if err != nil {
			t.Fatal(err)
		}
		want := sampleCall()
		if string(c.Request) != string(want.Request) {
			t.Errorf("the claimed request changed with the caller's: %q", c.Request)
		}
		c.Approvals[0].By = "mallory"
		res := Result{Status: 200, Header: map[string][]string{"X-One": {"a"}}, Body: []byte("ok")}
		f, err := s.Finish(ctx, c.ID, c.Fence, Executed, res)
		if err != nil {
			t.Fatal(err)
		}
		res.Header["X-One"][0], res.Body[0] = "z", 'z'
		f.Result.Header["X-One"] = []string{"y"}
		f.Result.Status = 500
		got := get(t, s, p.ID) // executed: its request is forgotten (ForgetsRequest)
		if string(got.Info) != string(want.Info) || string(got.Brief) != string(want.Brief) {
			t.Errorf("the parked bytes changed with the caller's: %q %q", got.Info, got.Brief)
		}
		if len(got.Approvals) != 1 || got.Approvals[0].By != "alice" {
			t.Errorf("approvals %+v: changed with a returned call's", got.Approvals)
		}
		if r := got.Result; r.Status != 200 || string(r.Body) != "ok" || !slices.Equal(r.Header["X-One"], []string{"a"}) {
			t.Errorf("result %d %q %v: changed with the caller's", r.Status, r.Body, r.Header)
		}
	})

	t.Run("ParkInvalid", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		if _, _, err := s.Park(ctx, Call{}, time.Minute); err == nil {
			t.Error("Park(no ID) succeeded")
		}
		if _, _, err := s.Park(ctx, sampleCall(), 0); err == nil {
			t.Error("Park(ttl 0) succeeded")
		}
	})

	t.Run("DuplicateID", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		c := sampleCall()
		first := park(t, s, c, long)

		// The same request again (a retried Park) returns the stored call.
		again, attached, err := s.Park(ctx, c, long)
		if err != nil || attached {
			t.Fatalf("Park(same request again) = attached %v, %v; want the stored call", attached, err)
		}
		if diff := cmp.Diff(first, again, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Park(same request again) (-first +again):\n%s", diff)
		}

		// Another request with a taken ID is refused.
		other := sampleCall()
		other.ID = c.ID
		other.RequestDigest = "sha256:other"
		if _, _, err := s.Park(ctx, other, long); !errors.Is(err, ErrConflict) {
			t.Errorf("Park(taken ID, other request) = %v, want ErrConflict", err)
		}
		if got := get(t, s, c.ID); got.RequestDigest != c.RequestDigest {
			t.Errorf("the stored call changed: digest %q", got.RequestDigest)
		}
	})

	t.Run("Attach", func(t *testing.T) {
		claim := func(t *testing.T, s Store, id string, _ func(time.Duration)) {
			decide(t, s, id, Approved)
			if _, err := s.Claim(t.Context(), id, long); err != nil {
				t.Fatal(err)
			}
		}
		finish := func(to State) func(*testing.T, Store, string, func(time.Duration)) {
			return func(t *testing.T, s Store, id string, advance func(time.Duration)) {
				claim(t, s, id, advance)
				c := get(t, s, id)
				if _, err := s.Finish(t.Context(), id, c.Fence, to, Result{Status: 200}); err != nil {
					t.Fatal(err)
				}
			}
		}
		tests := []struct {
			name   string
			ttl    time.Duration
			to     func(t *testing.T, s Store, id string, advance func(time.Duration))
			attach bool
		}{
			{"waiting", long, func(*testing.T, Store, string, func(time.Duration)) {}, true},
			{"approved", long, func(t *testing.T, s Store, id string, _ func(time.Duration)) {
				decide(t, s, id, Approved)
			}, true},
			{"executing", long, claim, true},
			{"executed, not delivered", long, finish(Executed), true},
			{"executed and delivered", long, func(t *testing.T, s Store, id string, advance func(time.Duration)) {
				finish(Executed)(t, s, id, advance)
				if first, _, err := s.Deliver(t.Context(), id); err != nil || !first {
					t.Fatalf("Deliver = %v, %v; want first", first, err)
				}
			}, false},
			// A refusal attaches until it is delivered, like a result.
			{"rejected, not delivered", long, func(t *testing.T, s Store, id string, _ func(time.Duration)) {
				if _, err := s.Decide(t.Context(), id, Decision{To: Rejected, By: "bob", Comment: "not today"}); err != nil {
					t.Fatal(err)
				}
			}, true},
			{"rejected and delivered", long, func(t *testing.T, s Store, id string, _ func(time.Duration)) {
				decide(t, s, id, Rejected)
				if first, _, err := s.Deliver(t.Context(), id); err != nil || !first {
					t.Fatalf("Deliver = %v, %v; want first", first, err)
				}
			}, false},
			{"cancelled", long, func(t *testing.T, s Store, id string, _ func(time.Duration)) {
				if _, err := s.Cancel(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}, false},
			{"failed", long, finish(Failed), false},
			{"unknown", long, finish(Unknown), false},
			// Past its ttl, unswept: Park itself must see that it expired,
			// and the expiry is an outcome its caller has not learnt.
			{"expired, unswept", short, func(_ *testing.T, _ Store, _ string, advance func(time.Duration)) {
				advance(beyond)
			}, true},
			{"expired, swept", short, func(t *testing.T, s Store, id string, advance func(time.Duration)) {
				advance(beyond)
				if got, err := s.Expire(t.Context(), 10); err != nil || !slices.Contains(ids(got), id) {
					t.Fatalf("Expire = %v, %v; want %s", ids(got), err, id)
				}
			}, true},
			{"expired and delivered", short, func(t *testing.T, s Store, id string, advance func(time.Duration)) {
				advance(beyond)
				if _, err := s.Expire(t.Context(), 10); err != nil {
					t.Fatal(err)
				}
				if first, _, err := s.Deliver(t.Context(), id); err != nil || !first {
					t.Fatalf("Deliver = %v, %v; want first", first, err)
				}
			}, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, advance := newStore(t)
				c1 := sampleCall()
				c1.AttachKey = "key-" + rand.Text()
				park(t, s, c1, tt.ttl)
				tt.to(t, s, c1.ID, advance)

				c2 := sampleCall()
				c2.AttachKey = c1.AttachKey
				got, attached, err := s.Park(t.Context(), c2, long)
				if err != nil {
					t.Fatal(err)
				}
				if attached != tt.attach {
					t.Fatalf("Park(same AttachKey) attached = %v, want %v", attached, tt.attach)
				}
				if tt.attach {
					if got.ID != c1.ID {
						t.Errorf("attached to %s, want %s", got.ID, c1.ID)
					}
					if _, err := s.Get(t.Context(), c2.ID); !errors.Is(err, ErrNotFound) {
						t.Errorf("Get(attached retry's own ID) = %v, want ErrNotFound (nothing stored)", err)
					}
					if got.State == Rejected && (got.DecidedBy != "bob" || got.Comment != "not today") {
						t.Errorf("attached to a rejection by %q with comment %q, want bob's %q", got.DecidedBy, got.Comment, "not today")
					}
					if !got.State.Terminal() {
						return
					}
					// Its outcome delivered once, the next retry is a new call.
					if first, _, err := s.Deliver(t.Context(), c1.ID); err != nil || !first {
						t.Fatalf("Deliver(attached %s) = %v, %v; want first", got.State, first, err)
					}
					c3 := sampleCall()
					c3.AttachKey = c1.AttachKey
					if got, attached, err := s.Park(t.Context(), c3, long); err != nil || attached || got.ID != c3.ID {
						t.Errorf("Park after delivery = %s, attached %v, %v; want the new call %s", got.ID, attached, err, c3.ID)
					}
					return
				}
				if got.ID != c2.ID || got.State != Waiting {
					t.Errorf("Park = %s %s, want a new waiting call %s", got.ID, got.State, c2.ID)
				}
				// The next retry attaches to the new call.
				c3 := sampleCall()
				c3.AttachKey = c1.AttachKey
				if got, attached, err := s.Park(t.Context(), c3, long); err != nil || !attached || got.ID != c2.ID {
					t.Errorf("Park(third) = %s, attached %v, %v; want attached to %s", got.ID, attached, err, c2.ID)
				}
			})
		}
	})

	t.Run("DecideFirstWins", func(t *testing.T) {
		for _, to := range []State{Approved, Rejected} {
			t.Run(string(to), func(t *testing.T) {
				s, _ := newStore(t)
				ctx := t.Context()
				c := park(t, s, sampleCall(), long)
				got, err := s.Decide(ctx, c.ID, Decision{To: to, By: "alice", Comment: "looks fine"})
				if err != nil {
					t.Fatal(err)
				}
				if got.State != to || got.DecidedBy != "alice" || got.Comment != "looks fine" {
					t.Errorf("Decide = %s by %q (%q), want %s by alice", got.State, got.DecidedBy, got.Comment, to)
				}
				if d := time.Since(got.DecidedAt).Abs(); d > slack {
					t.Errorf("DecidedAt is %v from now", d)
				}
				// The call as stored, field for field, but its request.
				stored := get(t, s, c.ID)
				if to == Approved && len(stored.Request) == 0 {
					t.Errorf("the approved call lost its request")
				}
				stored.Request = nil
				if diff := cmp.Diff(stored, got); diff != "" {
					t.Errorf("Decide returned (-get without request +decide):\n%s", diff)
				}
				for _, second := range []State{Approved, Rejected} {
					_, err := s.Decide(ctx, c.ID, Decision{To: second, By: "bob", Comment: ""})
					var se *StateError
					if !errors.As(err, &se) || !errors.Is(err, ErrConflict) {
						t.Fatalf("second Decide(%s) = %v, want a *StateError", second, err)
					}
					if se.Call.State != to || se.Call.DecidedBy != "alice" {
						t.Errorf("second Decide: StateError has %s by %q, want the winner %s by alice",
							se.Call.State, se.Call.DecidedBy, to)
					}
				}
				if got := get(t, s, c.ID); got.State != to || got.DecidedBy != "alice" {
					t.Errorf("after both: %s by %q", got.State, got.DecidedBy)
				}
			})
		}
		t.Run("invalid", func(t *testing.T) {
			s, _ := newStore(t)
			c := park(t, s, sampleCall(), long)
			for _, to := range []State{Waiting, Executed, Cancelled, "maybe"} {
				if _, err := s.Decide(t.Context(), c.ID, Decision{To: to, By: "alice", Comment: ""}); err == nil || errors.Is(err, ErrConflict) {
					t.Errorf("Decide(%s) = %v, want an invalid-argument error", to, err)
				}
			}
			if got := get(t, s, c.ID); got.State != Waiting {
				t.Errorf("state %s after invalid decisions", got.State)
			}
		})
		t.Run("missing", func(t *testing.T) {
			s, _ := newStore(t)
			if _, err := s.Decide(t.Context(), "nope", Decision{To: Approved, By: "alice", Comment: ""}); !errors.Is(err, ErrNotFound) {
				t.Errorf("Decide(missing) = %v, want ErrNotFound", err)
			}
		})
	})

	t.Run("Cancel", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		c := park(t, s, sampleCall(), long)
		got, err := s.Cancel(ctx, c.ID)
		if err != nil || got.State != Cancelled || got.DecidedAt.IsZero() {
			t.Fatalf("Cancel = %s (decided %v), %v; want cancelled", got.State, got.DecidedAt, err)
		}
		if _, err := s.Cancel(ctx, c.ID); !isState(err, Cancelled) {
			t.Errorf("Cancel(cancelled) = %v, want a StateError (cancelled)", err)
		}
		if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice", Comment: ""}); !isState(err, Cancelled) {
			t.Errorf("Decide(cancelled) = %v, want a StateError (cancelled)", err)
		}
		a := park(t, s, sampleCall(), long)
		decide(t, s, a.ID, Approved)
		if _, err := s.Cancel(ctx, a.ID); !isState(err, Approved) {
			t.Errorf("Cancel(approved) = %v, want a StateError (approved)", err)
		}
		if _, err := s.Cancel(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Cancel(missing) = %v, want ErrNotFound", err)
		}
		// An empty ID names no call, and moves none: not the call whose ID
		// is the argument after it (a script's arguments shifting).
		shifted := sampleCall()
		shifted.ID = "cancelled"
		park(t, s, shifted, long)
		if _, err := s.Cancel(ctx, ""); !errors.Is(err, ErrNotFound) {
			t.Errorf("Cancel(\"\") = %v, want ErrNotFound", err)
		}
		if _, err := s.Decide(ctx, "", Decision{To: Approved, By: "alice"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("Decide(\"\") = %v, want ErrNotFound", err)
		}
		if g := get(t, s, shifted.ID); g.State != Waiting {
			t.Errorf("call %q is %s after Cancel and Decide of \"\", want waiting", shifted.ID, g.State)
		}
	})

	t.Run("Claim", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		c := park(t, s, sampleCall(), long)
		if _, err := s.Claim(ctx, c.ID, long); !isState(err, Waiting) {
			t.Errorf("Claim(waiting) = %v, want a StateError (waiting)", err)
		}
		decide(t, s, c.ID, Approved)
		got, err := s.Claim(ctx, c.ID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != Executing || got.Fence <= c.Fence {
			t.Errorf("Claim = %s fence %d, want executing with a fence above %d", got.State, got.Fence, c.Fence)
		}
		if d := time.Until(got.LeaseUntil) - time.Minute; d.Abs() > slack {
			t.Errorf("LeaseUntil is now + 1m %+v", d)
		}
		_, err = s.Claim(ctx, c.ID, time.Minute)
		var se *StateError
		if !errors.As(err, &se) || se.Call.State != Executing || se.Call.Fence != got.Fence {
			t.Errorf("second Claim = %v, want a StateError with the first claim", err)
		}
		if _, err := s.Claim(ctx, c.ID, 0); err == nil || errors.Is(err, ErrConflict) {
			t.Errorf("Claim(lease 0) = %v, want an invalid-argument error", err)
		}
		if _, err := s.Claim(ctx, "nope", time.Minute); !errors.Is(err, ErrNotFound) {
			t.Errorf("Claim(missing) = %v, want ErrNotFound", err)
		}
	})

	t.Run("Finish", func(t *testing.T) {
		for _, to := range []State{Executed, Failed, Unknown} {
			t.Run(string(to), func(t *testing.T) {
				s, _ := newStore(t)
				ctx := t.Context()
				c := claimed(t, s, long)
				res := Result{
					Status:    201,
					Header:    map[string][]string{"Content-Type": {"application/json"}, "X-Two": {"a", "b"}},
					Body:      []byte("{\"ok\":true}\x00\xff"),
					Truncated: true,
				}
				if _, err := s.Finish(ctx, c.ID, c.Fence-1, to, res); !errors.Is(err, ErrFenced) {
					t.Errorf("Finish(stale fence) = %v, want ErrFenced", err)
				}
				if _, err := s.Finish(ctx, c.ID, c.Fence, Approved, res); err == nil || errors.Is(err, ErrFenced) {
					t.Errorf("Finish(to approved) = %v, want an invalid-argument error", err)
				}
				got, err := s.Finish(ctx, c.ID, c.Fence, to, res)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != to {
					t.Errorf("Finish: state %s, want %s", got.State, to)
				}
				if diff := cmp.Diff(&res, get(t, s, c.ID).Result); diff != "" {
					t.Errorf("stored result (-want +got):\n%s", diff)
				}
				// The call Finish returns is the call as stored, field for
				// field: its result, and all the rest but what the
				// executor has from its claim (and the request, which an
				// ended call no longer has).
				if diff := cmp.Diff(finished(get(t, s, c.ID)), got); diff != "" {
					t.Errorf("Finish returned (-get +finish):\n%s", diff)
				}
				if got.Request != nil || got.Info != nil || got.Brief != nil {
					t.Errorf("Finish returned the request, info or brief")
				}
				if _, err := s.Finish(ctx, c.ID, c.Fence, Executed, Result{Status: 500}); !errors.Is(err, ErrFenced) {
					t.Errorf("second Finish = %v, want ErrFenced", err)
				}
				if got := get(t, s, c.ID); got.State != to || got.Result.Status != 201 {
					t.Errorf("second Finish changed the call: %s %d", got.State, got.Result.Status)
				}
			})
		}
		t.Run("empty result", func(t *testing.T) {
			s, _ := newStore(t)
			c := claimed(t, s, long)
			got, err := s.Finish(t.Context(), c.ID, c.Fence, Executed, Result{Status: 204})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&Result{Status: 204}, get(t, s, c.ID).Result, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("stored result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(finished(get(t, s, c.ID)), got); diff != "" {
				t.Errorf("Finish returned (-get +finish):\n%s", diff)
			}
		})
		// A header as an upstream may send it: the result Finish returns
		// is the one Get reads back, whatever a store makes of it.
		t.Run("odd header", func(t *testing.T) {
			s, _ := newStore(t)
			c := claimed(t, s, long)
			res := Result{
				Status: 200,
				Header: map[string][]string{"X-Latin1": {"caf\xe9"}, "X-Empty": {}, "X-None": nil, "X-Html": {"<a&b>\u2028"}},
				Body:   []byte{},
			}
			got, err := s.Finish(t.Context(), c.ID, c.Fence, Executed, res)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(finished(get(t, s, c.ID)), got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Finish returned (-get +finish):\n%s", diff)
			}
			if diff := cmp.Diff(get(t, s, c.ID).Result.Header, got.Result.Header); diff != "" {
				t.Errorf("Finish returned the header (-get +finish):\n%s", diff)
			}
		})
		t.Run("not executing", func(t *testing.T) {
			s, _ := newStore(t)
			c := park(t, s, sampleCall(), long)
			if _, err := s.Finish(t.Context(), c.ID, 0, Executed, Result{}); !errors.Is(err, ErrFenced) {
				t.Errorf("Finish(waiting) = %v, want ErrFenced", err)
			}
			if _, err := s.Finish(t.Context(), "nope", 1, Executed, Result{}); !errors.Is(err, ErrNotFound) {
				t.Errorf("Finish(missing) = %v, want ErrNotFound", err)
			}
		})
	})

	t.Run("Deliver", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		c := claimed(t, s, long)
		if _, _, err := s.Deliver(ctx, c.ID); !isState(err, Executing) {
			t.Errorf("Deliver(executing) = %v, want a StateError (executing)", err)
		}
		if _, err := s.Finish(ctx, c.ID, c.Fence, Executed, Result{Status: 200}); err != nil {
			t.Fatal(err)
		}
		first, got, err := s.Deliver(ctx, c.ID)
		if err != nil || !first || !got.Delivered || got.Result == nil {
			t.Fatalf("Deliver = %v, delivered %v, %v; want first", first, got.Delivered, err)
		}
		for range 2 {
			if first, _, err := s.Deliver(ctx, c.ID); err != nil || first {
				t.Errorf("Deliver again = %v, %v; want not first", first, err)
			}
		}
		if _, _, err := s.Deliver(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Deliver(missing) = %v, want ErrNotFound", err)
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		t.Run("waiting, unswept", func(t *testing.T) {
			s, advance := newStore(t)
			ctx := t.Context()
			a := park(t, s, sampleCall(), short)
			b := park(t, s, sampleCall(), short)
			advance(beyond)
			if _, err := s.Decide(ctx, a.ID, Decision{To: Approved, By: "alice", Comment: ""}); !isState(err, Expired) {
				t.Errorf("Decide(past ttl) = %v, want a StateError (expired)", err)
			}
			if _, err := s.Cancel(ctx, b.ID); !isState(err, Expired) {
				t.Errorf("Cancel(past ttl) = %v, want a StateError (expired)", err)
			}
			for _, id := range []string{a.ID, b.ID} {
				if got := get(t, s, id); got.State != Expired || got.DecidedBy != "" {
					t.Errorf("%s: %s by %q, want expired by nobody", id, got.State, got.DecidedBy)
				}
			}
		})
		t.Run("waiting, swept", func(t *testing.T) {
			s, advance := newStore(t)
			ctx := t.Context()
			a := park(t, s, sampleCall(), short)
			live := park(t, s, sampleCall(), long)
			if got, err := s.Expire(ctx, 10); err != nil || len(got) != 0 {
				t.Errorf("Expire before the ttl = %v, %v; want nothing", ids(got), err)
			}
			advance(beyond)
			got, err := s.Expire(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ID != a.ID || got[0].State != Expired {
				t.Errorf("Expire = %v, want [%s expired]", states(got), a.ID)
			}
			if got, err := s.Expire(ctx, 10); err != nil || len(got) != 0 {
				t.Errorf("Expire again = %v, %v; want nothing", ids(got), err)
			}
			if got := get(t, s, live.ID); got.State != Waiting {
				t.Errorf("the call with a long ttl is %s", got.State)
			}
			if _, err := s.Decide(ctx, a.ID, Decision{To: Approved, By: "alice", Comment: ""}); !isState(err, Expired) {
				t.Errorf("Decide(expired) = %v, want a StateError (expired)", err)
			}
		})
		t.Run("limit", func(t *testing.T) {
			s, advance := newStore(t)
			ctx := t.Context()
			for range 3 {
				park(t, s, sampleCall(), short)
			}
			advance(beyond)
			if got, err := s.Expire(ctx, 2); err != nil || len(got) != 2 {
				t.Errorf("Expire(2) = %v, %v; want 2 calls", ids(got), err)
			}
			if got, err := s.Expire(ctx, 2); err != nil || len(got) != 1 {
				t.Errorf("Expire(2) again = %v, %v; want the last call", ids(got), err)
			}
		})
		t.Run("approved, unclaimed", func(t *testing.T) {
			// An approved window shorter than the ttl left: the approval
			// does not move the expiry.
			s, advance := newStore(t, approvedWindow(time.Millisecond))
			ctx := t.Context()
			a := park(t, s, sampleCall(), short)
			b := park(t, s, sampleCall(), short)
			decide(t, s, a.ID, Approved)
			decide(t, s, b.ID, Approved)
			advance(beyond)
			if _, err := s.Claim(ctx, a.ID, long); !isState(err, Expired) {
				t.Errorf("Claim(past ttl) = %v, want a StateError (expired)", err)
			}
			got, err := s.Expire(ctx, 10)
			if err != nil || len(got) != 1 || got[0].ID != b.ID || got[0].State != Expired || got[0].DecidedBy != "alice" {
				t.Errorf("Expire = %v, %v; want [%s expired, approved by alice]", states(got), err, b.ID)
			}
		})
		t.Run("lease", func(t *testing.T) {
			s, advance := newStore(t)
			ctx := t.Context()
			swept := claimed(t, s, short)
			unswept := claimed(t, s, short)
			advance(beyond)
			// Unswept: the late Finish is refused and makes the call
			// unknown, and says so (ErrLapsed, with the call), once.
			late, err := s.Finish(ctx, unswept.ID, unswept.Fence, Executed, Result{Status: 200})
			if !errors.Is(err, ErrLapsed) || !errors.Is(err, ErrFenced) || late.ID != unswept.ID || late.State != Unknown {
				t.Errorf("Finish(past lease) = %s %s, %v; want the call unknown and ErrLapsed", late.ID, late.State, err)
			}
			if diff := cmp.Diff(get(t, s, unswept.ID), late); diff != "" {
				t.Errorf("Finish(past lease) returned (-get +finish):\n%s", diff)
			}
			if _, err := s.Finish(ctx, unswept.ID, unswept.Fence, Executed, Result{Status: 200}); !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
				t.Errorf("Finish(past lease) again = %v, want ErrFenced, not ErrLapsed", err)
			}
			if got := get(t, s, unswept.ID); got.State != Unknown || got.Result != nil {
				t.Errorf("after a late Finish: %s, result %v; want unknown without a result", got.State, got.Result)
			}
			got, err := s.Expire(ctx, 10)
			if err != nil || len(got) != 1 || got[0].ID != swept.ID || got[0].State != Unknown {
				t.Fatalf("Expire = %v, %v; want [%s unknown]", states(got), err, swept.ID)
			}
			if _, err := s.Finish(ctx, swept.ID, swept.Fence, Executed, Result{Status: 200}); !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
				t.Errorf("Finish after Expire = %v, want ErrFenced, not ErrLapsed", err)
			}
			if _, err := s.Claim(ctx, swept.ID, long); !isState(err, Unknown) {
				t.Errorf("Claim(unknown) = %v, want a StateError (unknown): never re-executed", err)
			}
		})
	})

	t.Run("Approved", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		a := park(t, s, sampleCall(), long)
		b := park(t, s, sampleCall(), long)
		park(t, s, sampleCall(), long) // waiting: never listed
		decide(t, s, a.ID, Approved)
		advance(beyond)
		decide(t, s, b.ID, Approved)
		if got := approved(t, s, short); !slices.Equal(got, []string{a.ID}) {
			t.Errorf("Approved(grace) = %v, want [%s]: only calls approved at least grace ago", got, a.ID)
		}
		if got := approved(t, s, 0); !slices.Equal(got, []string{a.ID, b.ID}) {
			t.Errorf("Approved(0) = %v, want [%s %s]", got, a.ID, b.ID)
		}
		if _, err := s.Claim(ctx, a.ID, long); err != nil {
			t.Fatal(err)
		}
		if got := approved(t, s, 0); !slices.Equal(got, []string{b.ID}) {
			t.Errorf("Approved(0) after claiming %s = %v, want [%s]: claimed calls are held", a.ID, got, b.ID)
		}
		if got, err := s.Approved(ctx, 0, 0); err != nil || len(got) != 0 {
			t.Errorf("Approved(limit 0) = %v, %v", ids(got), err)
		}
		// What the sweeper reads before it claims: every store gives it.
		got, err := s.Approved(ctx, 0, 10)
		if err != nil || len(got) != 1 {
			t.Fatalf("Approved = %v, %v", ids(got), err)
		}
		if c := got[0]; c.ID != b.ID || c.State != Approved || c.Upstream != b.Upstream || c.Upstream == "" ||
			c.ExpiresAt.IsZero() || c.DecidedAt.IsZero() || c.CreatedAt.IsZero() {
			t.Errorf("Approved gave %+v: want its ID, state, upstream and times", c)
		}
	})

	t.Run("List", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		var want []string
		for range 3 {
			want = append(want, park(t, s, sampleCall(), long).ID)
			advance(5 * time.Millisecond) // distinct times: oldest first is observable
		}
		list := func(st State, limit int) []string {
			t.Helper()
			got, err := s.List(ctx, st, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range got {
				if c.State != st {
					t.Errorf("List(%s) has %s in state %s", st, c.ID, c.State)
				}
			}
			return ids(got)
		}
		if got := list(Waiting, 10); !slices.Equal(got, want) {
			t.Errorf("List(waiting) = %v, want %v (oldest first)", got, want)
		}
		if got := list(Waiting, 2); !slices.Equal(got, want[:2]) {
			t.Errorf("List(waiting, 2) = %v, want %v", got, want[:2])
		}
		decide(t, s, want[1], Approved)
		decide(t, s, want[0], Rejected)
		if got := list(Waiting, 10); !slices.Equal(got, want[2:]) {
			t.Errorf("List(waiting) = %v, want %v", got, want[2:])
		}
		if got := list(Approved, 10); !slices.Equal(got, want[1:2]) {
			t.Errorf("List(approved) = %v, want %v", got, want[1:2])
		}
		if got := list(Rejected, 10); !slices.Equal(got, want[:1]) {
			t.Errorf("List(rejected) = %v, want %v", got, want[:1])
		}
		if got := list(Executed, 10); len(got) != 0 {
			t.Errorf("List(executed) = %v, want none", got)
		}
		if _, err := s.List(ctx, "nonsense", 10); err == nil {
			t.Error("List(nonsense) succeeded")
		}
		for st, want := range map[State]int{Waiting: 1, Approved: 1, Rejected: 1, Executed: 0} {
			if n, err := s.Count(ctx, st); err != nil || n != want {
				t.Errorf("Count(%s) = %d, %v; want %d", st, n, err, want)
			}
		}
		if _, err := s.Count(ctx, "nonsense"); err == nil {
			t.Error("Count(nonsense) succeeded")
		}
	})

	t.Run("ListBrief", func(t *testing.T) { testListBrief(t, newStore) })

	t.Run("Wait", func(t *testing.T) {
		t.Run("wakes", func(t *testing.T) {
			s, _ := newStore(t)
			c := park(t, s, sampleCall(), long)
			decided := make(chan error, 1)
			go func() {
				time.Sleep(50 * time.Millisecond)
				_, err := s.Decide(context.WithoutCancel(t.Context()), c.ID, Decision{To: Approved, By: "alice", Comment: ""})
				decided <- err
			}()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			got, err := s.Wait(ctx, c.ID, Waiting)
			if err != nil || got.State != Approved {
				t.Errorf("Wait = %s, %v; want approved", got.State, err)
			}
			// as in WaitHeld below: the wait may return first
			if err := <-decided; err != nil && !errors.Is(err, ErrNotReplicated) {
				t.Errorf("Decide = %v", err)
			}
		})
		t.Run("timeout", func(t *testing.T) {
			s, _ := newStore(t)
			c := park(t, s, sampleCall(), long)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			got, err := s.Wait(ctx, c.ID, Waiting)
			if !errors.Is(err, context.DeadlineExceeded) || got.ID != c.ID || got.State != Waiting {
				t.Errorf("Wait = %s %s, %v; want the waiting call and DeadlineExceeded", got.ID, got.State, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Wait took %v after its context ended", d)
			}
		})
		t.Run("already changed", func(t *testing.T) {
			s, _ := newStore(t)
			c := park(t, s, sampleCall(), long)
			decide(t, s, c.ID, Rejected)
			got, err := s.Wait(t.Context(), c.ID, Waiting)
			if err != nil || got.State != Rejected {
				t.Errorf("Wait = %s, %v; want rejected at once", got.State, err)
			}
		})
		t.Run("missing", func(t *testing.T) {
			s, _ := newStore(t)
			if _, err := s.Wait(t.Context(), "nope", Waiting); !errors.Is(err, ErrNotFound) {
				t.Errorf("Wait(missing) = %v, want ErrNotFound", err)
			}
		})
	})

	t.Run("WaitHeld", func(t *testing.T) {
		// An approval may come back as ID and State alone; anything else
		// whole, as from Wait.
		s, _ := newStore(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		for _, to := range []State{Approved, Rejected} {
			c := park(t, s, sampleCall(), long)
			decided := make(chan error, 1)
			go func() {
				time.Sleep(50 * time.Millisecond)
				_, err := s.Decide(context.WithoutCancel(ctx), c.ID, Decision{To: to, By: "alice", Comment: "why"})
				decided <- err
			}()
			got, err := s.WaitHeld(ctx, c.ID, Waiting)
			// The wait may return before the decision has: a store that
			// confirms writes with its replicas publishes first. The
			// decision is made either way; unconfirmed is not this test's.
			if err := <-decided; err != nil && !errors.Is(err, ErrNotReplicated) {
				t.Errorf("Decide(%s) = %v", to, err)
			}
			if err != nil || got.ID != c.ID || got.State != to {
				t.Fatalf("WaitHeld = %s %s, %v; want %s", got.ID, got.State, err, to)
			}
			if to != Approved && (got.DecidedBy != "alice" || got.Comment != "why" || string(got.Info) != string(c.Info)) {
				t.Errorf("WaitHeld after %s = %+v; want the call whole", to, got)
			}
		}
	})

	t.Run("Peek", func(t *testing.T) {
		// Get's call, maybe without the request; a transition made
		// through the store shows at once; unknown calls are not found.
		s, _ := newStore(t)
		if _, err := s.Peek(t.Context(), "no-such-call"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Peek(missing) = %v, want ErrNotFound", err)
		}
		c := park(t, s, sampleCall(), long)
		got, err := s.Peek(t.Context(), c.ID)
		if err != nil || got.ID != c.ID || got.State != Waiting || string(got.Info) != string(c.Info) ||
			string(got.Brief) != string(c.Brief) || got.Subject != c.Subject || !slices.Equal(got.Quorum, c.Quorum) {
			t.Errorf("Peek = %+v, %v; want the call as parked", got, err)
		}
		for _, to := range []State{Approved, Executing} {
			if to == Approved {
				decide(t, s, c.ID, Approved)
			} else if _, err := s.Claim(t.Context(), c.ID, long); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Peek(t.Context(), c.ID); err != nil || got.State != to {
				t.Errorf("Peek after the move to %s = %s, %v", to, got.State, err)
			}
		}
	})

	t.Run("AttachKeys", func(t *testing.T) { testAttachKeys(t, newStore) })
	t.Run("Principal", func(t *testing.T) { testPrincipal(t, newStore) })
	t.Run("Caps", func(t *testing.T) { testCaps(t, newStore) })
	t.Run("Rate", func(t *testing.T) { testRate(t, newStore) })
	t.Run("EndedCapped", func(t *testing.T) { testEndedCapped(t, newStore) })
	t.Run("ApprovedWindow", func(t *testing.T) { testApprovedWindow(t, newStore) })
	t.Run("Overdue", func(t *testing.T) { testOverdue(t, newStore) })
	t.Run("ForgetsRequest", func(t *testing.T) { testForgetsRequest(t, newStore) })
	t.Run("Quorum", func(t *testing.T) { testQuorum(t, newStore) })
	t.Run("DecideClaim", func(t *testing.T) { testDecideClaim(t, newStore) })
	t.Run("Nonces", func(t *testing.T) { testNonces(t, newStore) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, newStore) })
	t.Run("Grants", func(t *testing.T) { testGrants(t, newStore) })
	t.Run("Listings", func(t *testing.T) { testListings(t, newStore) })
	t.Run("Ends", func(t *testing.T) { testEnds(t, newStore) })

	t.Run("Retention", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		// Executed and never delivered: it attaches retries until it is gone.
		done := sampleCall()
		done.AttachKey = "key-" + rand.Text()
		done = park(t, s, done, long)
		decide(t, s, done.ID, Approved)
		done, err := s.Claim(ctx, done.ID, long)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(ctx, done.ID, done.Fence, Executed, Result{Status: 200}); err != nil {
			t.Fatal(err)
		}
		rejectedCall := park(t, s, sampleCall(), long)
		decide(t, s, rejectedCall.ID, Rejected)
		cancelled := park(t, s, sampleCall(), long)
		if _, err := s.Cancel(ctx, cancelled.ID); err != nil {
			t.Fatal(err)
		}
		forgotten := park(t, s, sampleCall(), short) // expires and is never swept

		advance(contractResultTTL / 2)
		if _, err := s.Get(ctx, done.ID); err != nil {
			t.Errorf("Get(finished call) within ResultTTL = %v", err)
		}
		advance(contractResultTTL/2 + beyond)
		for _, id := range []string{done.ID, rejectedCall.ID, cancelled.ID, forgotten.ID} {
			if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%s) after ResultTTL = %v, want ErrNotFound", id, err)
			}
		}
		for _, st := range []State{Waiting, Executed, Rejected, Cancelled, Expired} {
			if got, err := s.List(ctx, st, 10); err != nil || len(got) != 0 {
				t.Errorf("List(%s) after ResultTTL = %v, %v; want none", st, ids(got), err)
			}
		}
		if got, err := s.Expire(ctx, 10); err != nil || len(got) != 0 {
			t.Errorf("Expire after ResultTTL = %v, %v; want nothing", ids(got), err)
		}
		again := sampleCall()
		again.AttachKey = done.AttachKey
		if _, attached, err := s.Park(ctx, again, long); err != nil || attached {
			t.Errorf("Park(forgotten AttachKey) = attached %v, %v; want a new call", attached, err)
		}
	})
}

// testStoreRace checks that concurrent transitions on one call have exactly
// one winner (docs/security.md, INV-3): 16 goroutines approve, reject, expire and
// cancel one waiting call, then 16 claim one approved call and 16 finish
// the claim. Concurrent parks stay within the caps (testCapsRace), and
// concurrent bindings of one session agree on one owner (testSessionsRace).
func testStoreRace(t *testing.T, newStore newStoreFunc) {
	const n = 16
	t.Run("Caps", func(t *testing.T) { testCapsRace(t, newStore) })
	t.Run("Rate", func(t *testing.T) { testRateRace(t, newStore) })
	t.Run("Deliver", func(t *testing.T) { testDeliverRace(t, newStore) })
	t.Run("Quorum", func(t *testing.T) { testQuorumRace(t, newStore) })
	t.Run("Sessions", func(t *testing.T) { testSessionsRace(t, newStore) })
	t.Run("Decide", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		wins := map[string]int{}
		for round := range 12 {
			// A ttl of "ttl" lets the expirers race the deciders: for a
			// store that sleeps, it is short; the memory clock just jumps.
			const ttl = 40 * time.Millisecond
			c := park(t, s, sampleCall(), ttl)
			type outcome struct {
				won  bool
				op   string
				seen Call // the call as the operation left or found it
			}
			outcomes := make([]outcome, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					// Spread the goroutines over twice the ttl; in odd rounds
					// all start late. With a real clock too, expiry (by
					// Expire, or by a transition finding the call past its
					// ttl) then competes with the decisions.
					delay := mrand.N(2 * ttl)
					if round%2 == 1 {
						delay = ttl + mrand.N(ttl/2)
					}
					time.Sleep(delay)
					by := fmt.Sprintf("approver-%d", i)
					var (
						got Call
						err error
						o   outcome
					)
					switch i % 4 {
					case 0:
						o.op = "approve"
						got, err = s.Decide(ctx, c.ID, Decision{To: Approved, By: by, Comment: ""})
					case 1:
						o.op = "reject"
						got, err = s.Decide(ctx, c.ID, Decision{To: Rejected, By: by, Comment: ""})
					case 2:
						o.op = "cancel"
						got, err = s.Cancel(ctx, c.ID)
					case 3:
						o.op = "expire"
						advance(ttl + 10*time.Millisecond)
						var calls []Call
						calls, err = s.Expire(ctx, 100)
						for _, e := range calls {
							// An approved call may expire later; only an
							// expiry from waiting is a decision.
							if e.ID == c.ID && e.DecidedAt.IsZero() {
								got = e
							}
						}
					}
					var se *StateError
					switch {
					case errors.As(err, &se):
						o.seen = se.Call
					case err != nil:
						t.Errorf("%s: %v", o.op, err)
					case got.ID != "":
						o.won, o.seen = true, got
					}
					outcomes[i] = o
				})
			}
			close(start)
			wg.Wait()

			final := get(t, s, c.ID)
			var winners []outcome
			for _, o := range outcomes {
				if o.won {
					winners = append(winners, o)
				}
				// Whoever lost saw the winner's decision (or a later expiry).
				if o.seen.ID != "" && o.seen.DecidedBy != final.DecidedBy {
					t.Errorf("round %d: %s saw a decision by %q, the call holds %q", round, o.op, o.seen.DecidedBy, final.DecidedBy)
				}
			}
			switch len(winners) {
			case 0:
				// Expired by a Decide or Cancel that found it past its ttl.
				if final.State != Expired || !final.DecidedAt.IsZero() {
					t.Errorf("round %d: no winner and the call is %s (decided %v)", round, final.State, final.DecidedAt)
				}
				wins["lazy expiry"]++
			case 1:
				w := winners[0]
				ok := final.State == w.seen.State ||
					w.seen.State == Approved && final.State == Expired // approved, then unclaimed past its ttl
				if !ok || final.DecidedBy != w.seen.DecidedBy {
					t.Errorf("round %d: %s won with %s by %q, the call is %s by %q",
						round, w.op, w.seen.State, w.seen.DecidedBy, final.State, final.DecidedBy)
				}
				wins[w.op]++
			default:
				for _, w := range winners {
					t.Errorf("round %d: %d winners: %s (%s)", round, len(winners), w.op, w.seen.State)
				}
			}
		}
		t.Logf("winners over the rounds: %v", wins)
	})

	t.Run("Claim", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		for round := range 8 {
			c := park(t, s, sampleCall(), long)
			decide(t, s, c.ID, Approved)
			claims := make([]Call, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					claims[i], errs[i] = s.Claim(ctx, c.ID, long)
				})
			}
			close(start)
			wg.Wait()
			var won []Call
			for i, err := range errs {
				switch {
				case err == nil:
					won = append(won, claims[i])
				case !isState(err, Executing):
					t.Errorf("round %d: Claim = %v, want success or a StateError (executing)", round, err)
				}
			}
			if len(won) != 1 {
				t.Fatalf("round %d: %d claims succeeded, want exactly 1 (at most one execution)", round, len(won))
			}
			fence := won[0].Fence

			// 16 finishes with the winner's fence: exactly one stores its result.
			finished := make([]error, n)
			start = make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					_, finished[i] = s.Finish(ctx, c.ID, fence, Executed, Result{Status: 200 + i})
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range finished {
				switch {
				case err == nil && winner >= 0:
					t.Errorf("round %d: finishes %d and %d both succeeded", round, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, ErrFenced):
					t.Errorf("round %d: Finish = %v, want success or ErrFenced", round, err)
				}
			}
			if got := get(t, s, c.ID); winner < 0 || got.State != Executed || got.Result.Status != 200+winner {
				t.Errorf("round %d: finish %d won, call %s with %+v", round, winner, got.State, got.Result)
			}
		}
	})
}

// sampleCall returns a call with every field Park keeps set, and a new ID.
// sampleCall returns a call of its own ID, placed (PlaceID) in the shard
// of its principal; asPrincipal gives it another.
func sampleCall() Call {
	const principal = "jwt:https://idp.example.com#agent@example.com"
	return Call{
		ID:            PlaceID("call-"+rand.Text(), principal),
		ArgsKey:       "args-" + rand.Text(),
		ArgsDigest:    "sha256:args",
		Subject:       "agent@example.com",
		Principal:     principal,
		Upstream:      "notes",
		Tool:          "notes.delete",
		Request:       []byte("POST /tools/notes.delete HTTP/1.1\r\nHost: notes\r\n\r\n{\"id\":42}\x00\xff"),
		RequestDigest: "sha256:request",
		Info:          []byte(`{"tool":"notes.delete","args":{"id":42}}`),
		Brief:         []byte(`{"kind":"rest","tool":"notes.delete"}`),
	}
}

// asPrincipal returns c as a call of principal, its ID placed in the
// principal's shard, as the proxy makes them.
func asPrincipal(c Call, principal string) Call {
	c.Principal = principal
	c.ID = PlaceID(c.ID, principal)
	return c
}

func park(t *testing.T, s Store, c Call, ttl time.Duration) Call {
	t.Helper()
	got, attached, err := s.Park(t.Context(), c, ttl)
	if err != nil || attached {
		t.Fatalf("Park(%s) = attached %v, %v", c.ID, attached, err)
	}
	return got
}

// finished is c, as Get returns it, as Finish returns it: without
// Info and Brief (see Store.Finish).
func finished(c Call) Call {
	c.Info, c.Brief = nil, nil
	return c
}

func get(t *testing.T, s Store, id string) Call {
	t.Helper()
	c, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decide(t *testing.T, s Store, id string, to State) {
	t.Helper()
	if _, err := s.Decide(t.Context(), id, Decision{To: to, By: "alice", Comment: ""}); err != nil {
		t.Fatalf("Decide(%s, %s) = %v", id, to, err)
	}
}

// claimed parks a call, approves it and claims it with the given lease.
func claimed(t *testing.T, s Store, lease time.Duration) Call {
	t.Helper()
	c := park(t, s, sampleCall(), long)
	decide(t, s, c.ID, Approved)
	c, err := s.Claim(t.Context(), c.ID, lease)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func approved(t *testing.T, s Store, grace time.Duration) []string {
	t.Helper()
	got, err := s.Approved(t.Context(), grace, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		if c.State != Approved {
			t.Errorf("Approved has %s in state %s", c.ID, c.State)
		}
	}
	return ids(got)
}

// isState reports whether err is a *StateError showing the call in state s.
func isState(err error, s State) bool {
	var se *StateError
	return errors.As(err, &se) && errors.Is(err, ErrConflict) && se.Call.State == s
}

func ids(cs []Call) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func states(cs []Call) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID+" "+string(c.State))
	}
	return out
}
