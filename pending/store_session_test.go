package pending

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// testSessions checks the session half of the contract: a session ID is
// bound to the first principal that binds it, for ttl from its owner's
// last use; another principal neither takes it nor prolongs it; an
// expired binding is gone and the ID can be bound anew.
func testSessions(t *testing.T, newStore newStoreFunc) {
	const alice, bob = "key:alice", "jwt:https://idp.example.com#alice"
	sid := func() string { return "sess-" + rand.Text() }

	t.Run("unknown", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		id := sid()
		if owner, err := s.SessionOwner(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("SessionOwner(unknown) = %q, %v; want ErrNotFound", owner, err)
		}
		if owner, err := s.TouchSession(ctx, id, alice, long); !errors.Is(err, ErrNotFound) {
			t.Errorf("TouchSession(unknown) = %q, %v; want ErrNotFound", owner, err)
		}
		if owner, err := s.SessionOwner(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("SessionOwner after TouchSession(unknown) = %q, %v; TouchSession must record nothing", owner, err)
		}
	})

	t.Run("first binder owns", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		id := sid()
		wantOwner(t, "BindSession(alice)", alice)(s.BindSession(ctx, id, alice, long))
		wantOwner(t, "BindSession(alice) again", alice)(s.BindSession(ctx, id, alice, long))
		wantOwner(t, "BindSession(bob)", alice)(s.BindSession(ctx, id, bob, long))
		wantOwner(t, "TouchSession(bob)", alice)(s.TouchSession(ctx, id, bob, long))
		wantOwner(t, "TouchSession(alice)", alice)(s.TouchSession(ctx, id, alice, long))
		wantOwner(t, "SessionOwner", alice)(s.SessionOwner(ctx, id))
		// Another session is another binding.
		other := sid()
		wantOwner(t, "BindSession(bob, other)", bob)(s.BindSession(ctx, other, bob, long))
		wantOwner(t, "SessionOwner(first)", alice)(s.SessionOwner(ctx, id))
	})

	t.Run("note", func(t *testing.T) {
		// A note goes with the binding; owners are compared on their
		// principal, so the owner's use with or without a note prolongs
		// it, and the note stays as first bound.
		s, advance := newStore(t)
		ctx := t.Context()
		id := sid()
		noted := alice + "\x00elicit-url"
		ttl := 2 * short
		wantOwner(t, "BindSession(alice, note)", noted)(s.BindSession(ctx, id, noted, ttl))
		advance(short)
		wantOwner(t, "TouchSession(alice)", noted)(s.TouchSession(ctx, id, alice, ttl))
		wantOwner(t, "BindSession(alice, another note)", noted)(s.BindSession(ctx, id, alice+"\x00other", ttl))
		wantOwner(t, "TouchSession(bob, the note)", noted)(s.TouchSession(ctx, id, bob+"\x00elicit-url", long))
		advance(beyond) // past the first ttl: alice's touch prolonged it
		wantOwner(t, "SessionOwner", noted)(s.SessionOwner(ctx, id))
		if p, n := SplitOwner(noted); p != alice || n != "elicit-url" {
			t.Errorf("SplitOwner(%q) = %q, %q", noted, p, n)
		}
		// A prefix of the principal is another principal.
		wantOwner(t, "TouchSession(key:alic)", noted)(s.TouchSession(ctx, id, "key:alic", long))
	})

	t.Run("a principal's cap", func(t *testing.T) {
		s, advance := newStore(t, func(o *Options) { o.MaxSessionsPerPrincipal = 3 })
		ctx := t.Context()
		room := func(who string, want bool) {
			t.Helper()
			if got, err := s.SessionRoom(ctx, who); err != nil || got != want {
				t.Fatalf("SessionRoom(%s) = %v, %v; want %v", who, got, err, want)
			}
		}
		ids := []string{sid(), sid(), sid()}
		for _, id := range ids {
			room(alice, true)
			wantOwner(t, "BindSession(alice)", alice)(s.BindSession(ctx, id, alice, short))
		}
		room(alice, false) // asked before a session is opened: none would bind
		room(bob, true)
		var capErr *SessionCapError
		if owner, err := s.BindSession(ctx, sid(), alice+"\x00note", long); !errors.As(err, &capErr) || !errors.Is(err, ErrTooManySessions) || capErr.Principal != alice {
			t.Fatalf("BindSession past alice's cap = %q, %v; want a *SessionCapError for %s", owner, err, alice)
		}
		// Her known sessions still bind, and another principal is not held
		// back by her.
		wantOwner(t, "BindSession(alice, known)", alice)(s.BindSession(ctx, ids[0], alice, short))
		wantOwner(t, "BindSession(bob)", bob)(s.BindSession(ctx, sid(), bob, long))
		advance(beyond) // her bindings expire: room again
		room(alice, true)
		wantOwner(t, "BindSession(alice) once hers expired", alice)(s.BindSession(ctx, sid(), alice, long))
	})

	t.Run("another's session is not counted", func(t *testing.T) {
		s, _ := newStore(t, func(o *Options) { o.MaxSessionsPerPrincipal = 2 })
		ctx := t.Context()
		hers := []string{sid(), sid()}
		for _, id := range hers {
			wantOwner(t, "BindSession(alice)", alice)(s.BindSession(ctx, id, alice, long))
		}
		for _, id := range hers { // an upstream handing bob IDs alice holds
			wantOwner(t, "BindSession(alice's, bob)", alice)(s.BindSession(ctx, id, bob, long))
		}
		if ok, err := s.SessionRoom(ctx, bob); err != nil || !ok {
			t.Errorf("SessionRoom(bob) after binds of alice's sessions = %v, %v; want true", ok, err)
		}
		for range 2 {
			wantOwner(t, "BindSession(bob)", bob)(s.BindSession(ctx, sid(), bob, long))
		}
	})

	t.Run("a session kept in use stays counted", func(t *testing.T) {
		s, advance := newStore(t, func(o *Options) { o.MaxSessionsPerPrincipal = 2 })
		ctx := t.Context()
		ids := []string{sid(), sid()}
		for _, id := range ids {
			wantOwner(t, "BindSession(alice)", alice)(s.BindSession(ctx, id, alice, short))
		}
		// Her requests keep both alive past the ttl they were bound with.
		for range 3 {
			advance(short / 2)
			for _, id := range ids {
				wantOwner(t, "TouchSession(alice)", alice)(s.TouchSession(ctx, id, alice, short))
			}
		}
		if ok, err := s.SessionRoom(ctx, alice); err != nil || ok {
			t.Errorf("SessionRoom(alice) with her 2 sessions in use = %v, %v; want false", ok, err)
		}
		var capErr *SessionCapError
		if owner, err := s.BindSession(ctx, sid(), alice, short); !errors.As(err, &capErr) {
			t.Errorf("BindSession past her cap, her sessions in use = %q, %v; want a *SessionCapError", owner, err)
		}
	})

	t.Run("ended", func(t *testing.T) {
		s, _ := newStore(t, func(o *Options) { o.MaxSessionsPerPrincipal = 2 })
		ctx := t.Context()
		ids := []string{sid(), sid()}
		for _, id := range ids {
			wantOwner(t, "BindSession(alice)", alice+"\x00note")(s.BindSession(ctx, id, alice+"\x00note", long))
		}
		if room, err := s.SessionRoom(ctx, alice); err != nil || room {
			t.Fatalf("SessionRoom(alice) at her cap = %v, %v; want false", room, err)
		}
		// Another principal cannot end hers, nor can an unknown session be
		// ended; neither is an error.
		if err := s.EndSession(ctx, ids[0], bob); err != nil {
			t.Fatalf("EndSession(bob) = %v", err)
		}
		wantOwner(t, "SessionOwner after bob's EndSession", alice+"\x00note")(s.SessionOwner(ctx, ids[0]))
		if err := s.EndSession(ctx, sid(), alice); err != nil {
			t.Fatalf("EndSession(unknown) = %v", err)
		}
		// Hers ends: gone, and no longer counted against her cap.
		if err := s.EndSession(ctx, ids[0], alice); err != nil {
			t.Fatalf("EndSession(alice) = %v", err)
		}
		if owner, err := s.SessionOwner(ctx, ids[0]); !errors.Is(err, ErrNotFound) {
			t.Errorf("SessionOwner after EndSession = %q, %v; want ErrNotFound", owner, err)
		}
		if owner, err := s.TouchSession(ctx, ids[0], alice, long); !errors.Is(err, ErrNotFound) {
			t.Errorf("TouchSession after EndSession = %q, %v; want ErrNotFound", owner, err)
		}
		if room, err := s.SessionRoom(ctx, alice); err != nil || !room {
			t.Fatalf("SessionRoom(alice) after one of hers ended = %v, %v; want true", room, err)
		}
		wantOwner(t, "BindSession(alice) in the room it left", alice)(s.BindSession(ctx, sid(), alice, long))
	})

	t.Run("expiry and refresh", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		ttl := 2 * short
		touched, bound, untouched, foreign := sid(), sid(), sid(), sid()
		for _, id := range []string{touched, bound, untouched, foreign} {
			wantOwner(t, "BindSession(alice)", alice)(s.BindSession(ctx, id, alice, ttl))
		}
		advance(short)
		// The owner's use starts the ttl again; another principal's does not.
		wantOwner(t, "TouchSession(alice)", alice)(s.TouchSession(ctx, touched, alice, ttl))
		wantOwner(t, "BindSession(alice)", alice)(s.BindSession(ctx, bound, alice, ttl))
		wantOwner(t, "BindSession(bob)", alice)(s.BindSession(ctx, foreign, bob, long))
		wantOwner(t, "TouchSession(bob)", alice)(s.TouchSession(ctx, foreign, bob, long))
		advance(beyond) // past the first ttl, within the refreshed one
		wantOwner(t, "SessionOwner(touched)", alice)(s.SessionOwner(ctx, touched))
		wantOwner(t, "SessionOwner(bound again)", alice)(s.SessionOwner(ctx, bound))
		for name, id := range map[string]string{"untouched": untouched, "used by another": foreign} {
			if owner, err := s.SessionOwner(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("SessionOwner(%s) past its ttl = %q, %v; want ErrNotFound", name, owner, err)
			}
			if owner, err := s.TouchSession(ctx, id, alice, ttl); !errors.Is(err, ErrNotFound) {
				t.Errorf("TouchSession(%s) past its ttl = %q, %v; want ErrNotFound", name, owner, err)
			}
		}
		advance(beyond)
		if owner, err := s.TouchSession(ctx, touched, alice, ttl); !errors.Is(err, ErrNotFound) {
			t.Errorf("TouchSession(touched) past the refreshed ttl = %q, %v; want ErrNotFound", owner, err)
		}
		// Once a binding is gone, the ID is free.
		wantOwner(t, "BindSession(bob) after expiry", bob)(s.BindSession(ctx, untouched, bob, long))
		wantOwner(t, "SessionOwner after rebinding", bob)(s.SessionOwner(ctx, untouched))
	})

	t.Run("invalid", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := t.Context()
		tooLong := string(make([]byte, MaxSessionIDBytes+1))
		for name, call := range map[string]func() (string, error){
			"Bind no ID":        func() (string, error) { return s.BindSession(ctx, "", alice, long) },
			"Bind long ID":      func() (string, error) { return s.BindSession(ctx, tooLong, alice, long) },
			"Bind no principal": func() (string, error) { return s.BindSession(ctx, sid(), "", long) },
			"Bind ttl 0":        func() (string, error) { return s.BindSession(ctx, sid(), alice, 0) },
			"Touch no ID":       func() (string, error) { return s.TouchSession(ctx, "", alice, long) },
			"Touch ttl 0":       func() (string, error) { return s.TouchSession(ctx, sid(), alice, 0) },
			"Owner no ID":       func() (string, error) { return s.SessionOwner(ctx, "") },
		} {
			if owner, err := call(); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("%s = %q, %v; want an invalid-argument error", name, owner, err)
			}
		}
	})
}

// testSessionsRace: principals binding one session ID at once agree on
// one owner, one of them.
func testSessionsRace(t *testing.T, newStore newStoreFunc) {
	const n = 16
	s, _ := newStore(t)
	ctx := t.Context()
	for round := range 8 {
		id := "sess-" + rand.Text()
		owners := make([]string, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				owner, err := s.BindSession(ctx, id, fmt.Sprintf("key:agent-%d", i), long)
				if err != nil {
					t.Errorf("round %d: BindSession: %v", round, err)
				}
				owners[i] = owner
			})
		}
		close(start)
		wg.Wait()
		stored, err := s.SessionOwner(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		winner := -1
		for i, o := range owners {
			if o != stored {
				t.Errorf("round %d: BindSession by agent-%d answered owner %q, the store holds %q", round, i, o, stored)
			}
			if o == fmt.Sprintf("key:agent-%d", i) {
				winner = i
			}
		}
		if winner < 0 {
			t.Errorf("round %d: the owner %q is none of the binders", round, stored)
		}
	}
}

// wantOwner checks a session method's answer: owner want, no error.
func wantOwner(t *testing.T, what, want string) func(string, error) {
	t.Helper()
	return func(got string, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want owner %q", what, got, err, want)
		}
	}
}

// TestMemorySessionsBounded: a MemoryStore keeps at most MaxSessions live
// bindings, refusing more with ErrTooManySessions, and makes room by
// dropping the expired ones when new ones come.
func TestMemorySessionsBounded(t *testing.T) {
	s, advance := newMemoryStore(t, func(o *Options) { o.MaxSessions = 3 })
	ms := s.(*MemoryStore)
	ctx := t.Context()
	for i := range 3 {
		if _, err := s.BindSession(ctx, fmt.Sprintf("s%d", i), "key:alice", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.BindSession(ctx, "s3", "key:alice", time.Minute); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("BindSession past the cap = %v, want ErrTooManySessions", err)
	}
	// Known sessions still work at the cap.
	if owner, err := s.BindSession(ctx, "s0", "key:alice", time.Hour); err != nil || owner != "key:alice" {
		t.Fatalf("BindSession(known) at the cap = %q, %v", owner, err)
	}
	advance(time.Minute) // s1 and s2 expire; s0 was prolonged
	for i := 3; i < 5; i++ {
		if _, err := s.BindSession(ctx, fmt.Sprintf("s%d", i), "key:bob", time.Minute); err != nil {
			t.Fatalf("BindSession(s%d) once bindings expired: %v", i, err)
		}
	}
	if n := len(ms.sessions); n != 3 {
		t.Errorf("the store holds %d bindings, want 3 (the expired ones dropped)", n)
	}
	if _, err := s.SessionOwner(ctx, "s1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SessionOwner(expired) = %v, want ErrNotFound", err)
	}

	// Without a cap in reach, the map is swept as it grows: it never holds
	// many more expired bindings than live ones.
	s, advance = newMemoryStore(t)
	ms = s.(*MemoryStore)
	for i := range 10000 {
		if _, err := s.BindSession(ctx, fmt.Sprintf("t%d", i), "key:alice", time.Second); err != nil {
			t.Fatal(err)
		}
		advance(100 * time.Millisecond) // about 10 bindings live at a time
	}
	if n := len(ms.sessions); n > 200 {
		t.Errorf("%d bindings kept with about 10 live, want the expired ones dropped", n)
	}
}
