package signin

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// maxExchanges is how many code exchanges may be in flight at once on a
// replica: far above what people signing in make, and a bound on the
// goroutines and provider connections that callbacks with made-up codes
// can hold while a slow provider answers. There is no bound per second:
// one would be shared by everyone, and a stream of made-up callbacks
// (each sign-in cookie a free GET /auth/login away) would spend it and
// lock honest approvers out; the provider's own limits can be reached
// without toolgate anyway, its client ID being public.
const maxExchanges = 64

// maxStates is how many exchanged states a replica remembers. Past it the
// oldest is forgotten (its cookie could then be replayed once more), never
// a new sign-in refused: a sign-in cookie is a free GET /auth/login away,
// so a full list that refused would lock approvers out, and one forgotten
// state gives a replay no more than a fresh cookie gives anyone.
const maxStates = 4096

// exchangeBound bounds the code exchanges in flight, and remembers the
// states it let through until they expire (at most maxStates, oldest
// first out), so that one state is exchanged once by this replica even
// when its cookie is sent again.
type exchangeBound struct {
	inFlight chan struct{}

	mu    sync.Mutex
	used  map[string]time.Time // state -> when its sign-in cookie expires
	order []usedState          // used's states, in the order they were exchanged
}

// usedState is an entry of exchangeBound.order.
type usedState struct {
	state string
	end   time.Time
}

func newExchangeBound() *exchangeBound {
	return &exchangeBound{inFlight: make(chan struct{}, maxExchanges), used: map[string]time.Time{}}
}

// take claims a place for the exchange of state, whose sign-in expires
// at expires; release gives the place back. fresh is false when state
// was exchanged before; ok is false when the bound is reached. Either
// way nothing is claimed.
func (b *exchangeBound) take(state string, expires, now time.Time) (release func(), fresh, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if end, seen := b.used[state]; seen && now.Before(end) {
		return nil, false, true
	}
	select {
	case b.inFlight <- struct{}{}:
	default:
		return nil, true, false
	}
	// Forget from the oldest: the expired, and past maxStates the oldest.
	for len(b.order) > 0 && (len(b.used) >= maxStates || !now.Before(b.order[0].end)) {
		old := b.order[0]
		b.order = b.order[1:]
		if b.used[old.state] == old.end {
			delete(b.used, old.state)
		}
	}
	b.used[state] = expires
	b.order = append(b.order, usedState{state, expires})
	return func() { <-b.inFlight }, true, true
}

// authStyle is how the client authenticates at the token endpoint, from
// the provider's token_endpoint_auth_methods_supported: in the
// Authorization header or in the request's parameters when the provider
// takes only one of the two, else left to oauth2, which tries one and then
// the other and remembers the one that worked (a client may be registered
// for either).
func authStyle(methods []string) oauth2.AuthStyle {
	basic, post := slices.Contains(methods, "client_secret_basic"), slices.Contains(methods, "client_secret_post")
	switch {
	case basic && !post:
		return oauth2.AuthStyleInHeader
	case post && !basic:
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}
