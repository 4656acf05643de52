package signin

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// startSignIn starts one sign-in, as a browser that is not signed in
// does (no call to the identity provider), and returns its state and
// sign-in cookie.
func startSignIn(t *testing.T, l *listener) (string, *http.Cookie) {
	t.Helper()
	res, body := get(t, stepper(t), l.URL+l.auth.LoginURL("/approvals"))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	loc, _ := url.Parse(res.Header.Get("Location"))
	state := loc.Query().Get("state")
	var login *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == loginCookie {
			login = ck
		}
	}
	if login == nil || state == "" {
		t.Fatal("no sign-in cookie or state")
	}
	return state, login
}

// callback sends the identity provider's answer of a sign-in, as a
// browser would, with a made-up code, and returns the status.
func callback(t *testing.T, l *listener, state string, login *http.Cookie, code string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, l.URL+"/auth/callback?state="+url.QueryEscape(state)+"&code="+code, nil)
	req.AddCookie(&http.Cookie{Name: loginCookie, Value: login.Value})
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

// TestCallbackReplayedOnce: a sign-in cookie costs nothing to get, and a
// callback that carries one makes toolgate call the provider's token
// endpoint with its client's credentials. Sent again (the browser would
// have dropped it), the same state is refused without a call; and each
// code costs one call, not two (the client's authentication style is
// taken from discovery, not guessed).
func TestCallbackReplayedOnce(t *testing.T) {
	l := newListener(t, nil)
	state, login := startSignIn(t, l)
	before := l.idp.Hits("POST /token")
	const n = 50
	for i := range n {
		status := callback(t, l, state, login, "junk"+string(rune('a'+i%26)))
		if i > 0 && status != http.StatusBadRequest {
			t.Errorf("replay %d: status %d, want 400", i, status)
		}
	}
	if got := l.idp.Hits("POST /token") - before; got != 1 {
		t.Errorf("one sign-in cookie, %d callbacks: %d code exchanges with the identity provider, want 1", n, got)
	}
}

// TestCallbacksBounded: sign-ins started by the hundred (each cookie a
// request away) make at most the burst of code exchanges; the rest are
// answered 503 with Retry-After, the provider not called.
func TestCallbacksBounded(t *testing.T) {
	l := newListener(t, nil)
	before := l.idp.Hits("POST /token")
	busy := 0
	for range exchangeBurst + 30 {
		state, login := startSignIn(t, l)
		if callback(t, l, state, login, "junk") == http.StatusServiceUnavailable {
			busy++
		}
	}
	got := l.idp.Hits("POST /token") - before
	// The test takes well under a second: the rate adds at most a few.
	if got > exchangeBurst+exchangeRate || busy < 20 {
		t.Errorf("%d sign-ins: %d code exchanges, %d answered busy; want at most %d exchanges", exchangeBurst+30, got, busy, exchangeBurst+exchangeRate)
	}
}

// TestAuthStyle: the client authenticates at the token endpoint as the
// provider's discovery says it takes it.
func TestAuthStyle(t *testing.T) {
	for methods, want := range map[string]oauth2.AuthStyle{
		"":                                       oauth2.AuthStyleInHeader,
		"client_secret_basic":                    oauth2.AuthStyleInHeader,
		"client_secret_basic client_secret_post": oauth2.AuthStyleInHeader,
		"client_secret_post":                     oauth2.AuthStyleInParams,
		"private_key_jwt client_secret_post":     oauth2.AuthStyleInParams,
	} {
		if got := authStyle(strings.Fields(methods)); got != want {
			t.Errorf("%q: %v, want %v", methods, got, want)
		}
	}
	// A state remembered expires with its sign-in.
	b := newExchangeBound()
	now := time.Now()
	if _, fresh, ok := b.take("s", now.Add(time.Minute), now); !fresh || !ok {
		t.Fatal("a first state refused")
	}
	if _, fresh, _ := b.take("s", now.Add(time.Minute), now.Add(30*time.Second)); fresh {
		t.Error("a state taken twice")
	}
	if _, fresh, _ := b.take("s", now.Add(3*time.Minute), now.Add(2*time.Minute)); !fresh {
		t.Error("a state still refused after its sign-in expired")
	}
}
