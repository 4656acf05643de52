package signin

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/testkit"
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
// have dropped it), the same state is refused without a call.
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
	if got := l.idp.Hits("POST /token") - before; got > 2 {
		t.Errorf("one sign-in cookie, %d callbacks: %d requests to the token endpoint, want one exchange (two requests at most, while oauth2 finds how the client authenticates)", n, got)
	}
}

// TestMadeUpCallbacksLockNobodyOut: callbacks with made-up codes, each on
// a sign-in cookie of its own, spend no bound that an honest approver's
// sign-in needs; and a provider whose discovery lists both ways for the
// client to authenticate still signs in a client registered for one.
func TestMadeUpCallbacksLockNobodyOut(t *testing.T) {
	l := newListener(t, func(c *OIDCConfig) {
		c.HTTPClient = &http.Client{Transport: rejectBasic{http.DefaultTransport}}
	})
	l.idp.SetUser(testkit.OIDCUser{Email: "alice@example.com"})
	for range 100 {
		state, login := startSignIn(t, l)
		callback(t, l, state, login, "junk")
	}
	res, body := l.signIn(t, testkit.Browser(t), "/approvals/x")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "alice@example.com") {
		t.Errorf("an approver's sign-in after 100 made-up callbacks: %d %q", res.StatusCode, excerpt(body, 120))
	}
}

// rejectBasic is a provider's token endpoint for a client registered with
// client_secret_post: its discovery lists both ways, the client's
// registration takes one.
type rejectBasic struct{ next http.RoundTripper }

func (r rejectBasic) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/token") && req.Header.Get("Authorization") != "" {
		return &http.Response{
			StatusCode: http.StatusUnauthorized, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"error":"invalid_client"}`)), Request: req,
		}, nil
	}
	return r.next.RoundTrip(req)
}

// TestExchangesInFlight: past maxExchanges in flight a callback is turned
// away without a call; a place given back is taken again.
func TestExchangesInFlight(t *testing.T) {
	b := newExchangeBound()
	now := time.Now()
	var releases []func()
	for i := range maxExchanges {
		release, fresh, ok := b.take(fmt.Sprint("s", i), now.Add(time.Minute), now)
		if !fresh || !ok {
			t.Fatalf("exchange %d refused", i)
		}
		releases = append(releases, release)
	}
	if _, fresh, ok := b.take("one more", now.Add(time.Minute), now); !fresh || ok {
		t.Fatalf("exchange %d: fresh %v, ok %v, want a fresh state turned away", maxExchanges+1, fresh, ok)
	}
	releases[0]()
	if _, _, ok := b.take("one more", now.Add(time.Minute), now); !ok {
		t.Error("a place given back is not taken again")
	}
}

// TestAuthStyle: the client authenticates at the token endpoint as the
// provider's discovery says when it takes one way only; else oauth2 finds
// the way.
func TestAuthStyle(t *testing.T) {
	for methods, want := range map[string]oauth2.AuthStyle{
		"":                                       oauth2.AuthStyleAutoDetect,
		"client_secret_basic":                    oauth2.AuthStyleInHeader,
		"client_secret_basic client_secret_post": oauth2.AuthStyleAutoDetect,
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

// TestRememberedStatesBounded: a replica remembers at most maxStates
// exchanged states; past it the oldest is forgotten and a new sign-in is
// never refused (a full list that refused would lock approvers out, each
// made-up sign-in being a free GET away). Expired states go first.
func TestRememberedStatesBounded(t *testing.T) {
	b := newExchangeBound()
	now := time.Now()
	for i := range maxStates + 100 {
		release, fresh, ok := b.take(fmt.Sprint("s", i), now.Add(time.Minute), now)
		if !fresh || !ok {
			t.Fatalf("state %d refused", i)
		}
		release()
	}
	if len(b.used) != maxStates || len(b.order) != maxStates {
		t.Errorf("%d states remembered (%d in order), want %d", len(b.used), len(b.order), maxStates)
	}
	if _, fresh, _ := b.take("s0", now.Add(time.Minute), now); !fresh {
		t.Error("the oldest state is still remembered past the bound")
	}
	if _, fresh, _ := b.take(fmt.Sprint("s", maxStates+99), now.Add(time.Minute), now); fresh {
		t.Error("the newest state is forgotten")
	}
	later := now.Add(2 * time.Minute)
	if release, _, ok := b.take("after", later.Add(time.Minute), later); ok {
		release()
	}
	if len(b.used) != 1 {
		t.Errorf("%d states remembered after all the others expired, want 1", len(b.used))
	}
}
