package signin

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/time/rate"
)

const (
	// maxExchanges is how many code exchanges may be in flight at once,
	// and exchangeRate, exchangeBurst how many may start in a second and
	// at once after a quiet spell: far above what people signing in
	// make, far below what would get a client rate-limited.
	maxExchanges  = 16
	exchangeRate  = 10
	exchangeBurst = 50
	// sweepStates is how many remembered states start a sweep of the
	// expired ones.
	sweepStates = 1024
)

// exchangeBound bounds code exchanges in flight and per second, across
// every caller: a sign-in cookie costs nothing to get, so a bound per
// cookie or per source would bound nothing. It also remembers the states
// it let through until they expire, so that one state is exchanged once
// by this replica even when its cookie is sent again.
type exchangeBound struct {
	inFlight chan struct{}
	rate     *rate.Limiter

	mu   sync.Mutex
	used map[string]time.Time // state -> when its sign-in cookie expires
}

func newExchangeBound() *exchangeBound {
	return &exchangeBound{
		inFlight: make(chan struct{}, maxExchanges), rate: rate.NewLimiter(exchangeRate, exchangeBurst),
		used: map[string]time.Time{},
	}
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
	if !b.rate.Allow() {
		<-b.inFlight
		return nil, true, false
	}
	if len(b.used) >= sweepStates {
		// The rate bounds the states of one sign-in's lifetime (10 a
		// second for loginTTL is 6,000 and the burst): past sweepStates,
		// each exchange forgets those that expired.
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
// the provider's token_endpoint_auth_methods_supported: in the request's
// parameters when it takes client_secret_post but not client_secret_basic,
// else in the Authorization header (the method OpenID Connect Discovery
// defaults to when the list is left out).
func authStyle(methods []string) oauth2.AuthStyle {
	if slices.Contains(methods, "client_secret_post") && !slices.Contains(methods, "client_secret_basic") {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}
