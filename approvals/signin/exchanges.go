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

// sweepStates is how many remembered states start a sweep of the expired
// ones.
const sweepStates = 1024

// exchangeBound bounds the code exchanges in flight, and remembers the
// states it let through until they expire, so that one state is
// exchanged once by this replica even when its cookie is sent again.
type exchangeBound struct {
	inFlight chan struct{}

	mu   sync.Mutex
	used map[string]time.Time // state -> when its sign-in cookie expires
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
	if len(b.used) >= sweepStates {
		// Past sweepStates each exchange forgets the states that expired:
		// the map holds the states exchanged in the last loginTTL.
		for k, end := range b.used {
			if !now.Before(end) {
				delete(b.used, k)
			}
		}
	}
	b.used[state] = expires
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
