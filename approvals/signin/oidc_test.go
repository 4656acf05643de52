package signin

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// listener is the approvals listener of a test: the authenticator's /auth/
// routes, and /approvals... pages that answer with who Identify says the
// caller is.
type listener struct {
	*httptest.Server
	auth  Authenticator
	idp   *testkit.OIDCProvider
	clock *testkit.Clock
}

// newListener starts an identity provider and a listener that signs in
// with it; change adjusts the configuration first.
func newListener(t *testing.T, change func(*OIDCConfig)) *listener {
	t.Helper()
	l := &listener{idp: testkit.NewOIDCProvider(t, "toolgate", "client-secret-0123"), clock: testkit.NewClock(time.Now())}
	l.idp.SetNow(l.clock.Now)
	var h http.Handler
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(l.Close)
	c := OIDCConfig{
		Issuer: l.idp.URL, ClientID: "toolgate", ClientSecret: "client-secret-0123",
		PublicURL: l.URL, CookieSecret: cookieSecret, Now: l.clock.Now, AllowedGroups: []string{AllowEveryone},
	}
	if change != nil {
		change(&c)
	}
	a, err := New(Config{Type: TypeOIDC, OIDC: c})
	if err != nil {
		t.Fatal(err)
	}
	l.auth = a
	mux := http.NewServeMux()
	mux.Handle("/auth/", a.Routes())
	mux.HandleFunc("/approvals/", l.whoami)
	mux.HandleFunc("/approvals", l.whoami)
	h = mux
	return l
}

func (l *listener) whoami(w http.ResponseWriter, r *http.Request) {
	ap, err := l.auth.Identify(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	fmt.Fprintf(w, "%s %s %v via %s", r.URL.RequestURI(), ap.Name, ap.Groups, ap.Via)
}

// stepper is a browser that stops at every redirect.
func stepper(t *testing.T) *http.Client {
	c := testkit.Browser(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// signIn walks a sign-in coming back to returnTo and returns the last
// answer.
func (l *listener) signIn(t *testing.T, c *http.Client, returnTo string) (*http.Response, string) {
	t.Helper()
	return get(t, c, l.URL+l.auth.LoginURL(returnTo))
}

// toCallback walks /auth/login and the provider's authorize endpoint and
// returns the callback URL the provider sends the browser to.
func (l *listener) toCallback(t *testing.T, c *http.Client) *url.URL {
	t.Helper()
	res, body := get(t, c, l.URL+l.auth.LoginURL("/approvals/x"))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	res, body = get(t, c, res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d %s", res.StatusCode, body)
	}
	u, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func cookieOf(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestOIDCSignIn(t *testing.T) {
	l := newListener(t, nil)
	l.idp.SetUser(testkit.OIDCUser{Email: "alice@example.com", Groups: []string{"dev", "ops", "dev"}})
	c := stepper(t)

	res, _ := get(t, c, l.URL+l.auth.LoginURL("/approvals/call-1?x=1"))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: status %d", res.StatusCode)
	}
	to, _ := url.Parse(res.Header.Get("Location"))
	q := to.Query()
	if !strings.HasPrefix(to.String(), l.idp.URL+"/authorize?") || q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" ||
		q.Get("redirect_uri") != l.URL+"/auth/callback" || q.Get("scope") != "openid email profile" {
		t.Errorf("login sends the browser to %s", to)
	}
	lc := cookieOf(res, loginCookie)
	if lc == nil || !lc.HttpOnly || lc.Path != "/auth/" || lc.Secure || lc.SameSite != http.SameSiteLaxMode || lc.MaxAge != 600 {
		t.Errorf("sign-in cookie %+v", lc)
	}
	if strings.Contains(lc.Value, q.Get("code_challenge")) {
		t.Error("the sign-in cookie holds the code challenge")
	}

	res, _ = get(t, c, to.String())
	res, body := get(t, c, res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != l.URL+"/approvals/call-1?x=1" {
		t.Fatalf("callback: %d to %q: %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	sc := cookieOf(res, SessionCookie)
	if sc == nil || !sc.HttpOnly || sc.Path != "/" || sc.Secure || sc.SameSite != http.SameSiteLaxMode || sc.MaxAge != int(DefaultSessionTTL.Seconds()) {
		t.Errorf("session cookie %+v", sc)
	}
	if lc := cookieOf(res, loginCookie); lc == nil || lc.MaxAge >= 0 {
		t.Errorf("the callback leaves the sign-in cookie: %+v", lc)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}

	_, body = get(t, c, l.URL+"/approvals/call-1?x=1")
	if want := "/approvals/call-1?x=1 alice@example.com [dev ops] via oidc"; body != want {
		t.Errorf("after sign-in: %q, want %q", body, want)
	}

	// The code was used: the same callback again is refused (the sign-in
	// cookie is gone, and the provider would not take the code twice).
	res, _ = get(t, c, l.URL+"/auth/callback?"+to.RawQuery)
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a second callback: %d", res.StatusCode)
	}
}

func TestOIDCFollowingRedirects(t *testing.T) {
	l := newListener(t, nil)
	c := testkit.Browser(t)
	res, body := l.signIn(t, c, "/approvals")
	if res.StatusCode != http.StatusOK || body != "/approvals alice@example.com [dev] via oidc" {
		t.Errorf("sign-in ends with %d %q", res.StatusCode, body)
	}
	// Without a session: 401 from the test page.
	res, _ = get(t, testkit.Browser(t), l.URL+"/approvals")
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a session: %d", res.StatusCode)
	}
}

func TestOIDCReturnPaths(t *testing.T) {
	l := newListener(t, nil)
	for _, ret := range []string{"//evil.example/x", `/\evil.example`, "https://evil.example/", "evil.example", `/./\evil.example/x`, `/a/../\evil.example`} {
		c := testkit.Browser(t)
		// LoginURL cleans the path itself; a hand-written login URL must
		// be cleaned by the login route.
		res, body := get(t, c, l.URL+"/auth/login?return="+url.QueryEscape(ret))
		if res.Request.URL.Host != strings.TrimPrefix(l.URL, "http://") || res.Request.URL.Path != "/approvals" {
			t.Errorf("return %q ends at %s (%s)", ret, res.Request.URL, body)
		}
	}
	if got := l.auth.LoginURL("//evil.example"); got != "/auth/login?return=%2Fapprovals" {
		t.Errorf("LoginURL = %q", got)
	}

	// The callback's own answer, not only where a Go client ends up: Go
	// reads "/\evil.example" as a path, browsers as another host.
	for _, ret := range []string{`/./\evil.example/x`, `/a/../\evil.example`} {
		c := stepper(t)
		res, _ := get(t, c, l.URL+"/auth/login?return="+url.QueryEscape(ret))
		res, _ = get(t, c, res.Header.Get("Location"))
		res, body := get(t, c, res.Header.Get("Location"))
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != l.URL+"/approvals" {
			t.Errorf("return %q: callback %d to %q (%s)", ret, res.StatusCode, loc, body)
		}
	}
}

// TestOIDCReturnInFlight: a sign-in cookie sealed before the return path
// was checked as it is now (a sign-in started before an upgrade) does not
// send the browser elsewhere either: the callback checks the path again.
func TestOIDCReturnInFlight(t *testing.T) {
	l := newListener(t, nil)
	c := stepper(t)
	cb := l.toCallback(t, c)
	u, _ := url.Parse(l.URL + "/auth/")
	var st loginState
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == loginCookie && l.auth.(*oidcAuth).cookies.login.open(ck.Value, &st) != nil {
			t.Fatal("the sign-in cookie does not open")
		}
	}
	st.Return = `/./\evil.example/x`
	v, err := l.auth.(*oidcAuth).cookies.login.seal(st)
	if err != nil {
		t.Fatal(err)
	}
	c.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Value: v, Path: "/auth/"}})
	res, body := get(t, c, cb.String())
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != l.URL+"/approvals" {
		t.Errorf("callback %d to %q (%s)", res.StatusCode, loc, body)
	}
}

func TestOIDCRefusals(t *testing.T) {
	tests := []struct {
		name   string
		change func(*OIDCConfig)
		user   testkit.OIDCUser
		status int
	}{
		{"nonce mismatch", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"nonce": "other"}}, http.StatusBadRequest},
		{"nonce missing", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"nonce": nil}}, http.StatusBadRequest},
		{"token for another client", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"aud": "other-client"}}, http.StatusBadGateway},
		{"token from another issuer", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"iss": "https://other.example"}}, http.StatusBadGateway},
		{"expired token", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}}, http.StatusBadGateway},
		{"issued in the future", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"iat": time.Now().Add(time.Hour).Unix()}}, http.StatusBadGateway},
		{"several audiences, no azp", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"aud": []string{"toolgate", "other"}}}, http.StatusBadGateway},
		{"several audiences, azp another client", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"aud": []string{"toolgate", "other"}, "azp": "other"}}, http.StatusBadGateway},
		{"azp another client", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"azp": "other"}}, http.StatusBadGateway},
		{"wrong client secret", func(o *OIDCConfig) { o.ClientSecret = "not-the-secret" }, testkit.OIDCUser{Email: "a@example.com"}, http.StatusBadGateway},
		{"no email claim", nil, testkit.OIDCUser{Subject: "u1", Claims: map[string]any{"email": nil}}, http.StatusForbidden},
		{"email not verified", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"email_verified": false}}, http.StatusForbidden},
		{"email_verified the string false", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"email_verified": "false"}}, http.StatusForbidden},
		{"email_verified the string true", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"email_verified": "true"}}, http.StatusForbidden},
		{"email_verified a number", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"email_verified": 1}}, http.StatusForbidden},
		{"name with a control character", nil, testkit.OIDCUser{Email: "a\x07@example.com"}, http.StatusForbidden},
		{"groups not strings", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"groups": []any{"dev", 7}}}, http.StatusForbidden},
		{"too many groups", nil, testkit.OIDCUser{Email: "a@example.com", Groups: strings.Split(manyGroups(MaxGroups+1), ",")}, http.StatusForbidden},
		{"groups too large for a cookie", nil, testkit.OIDCUser{Email: "a@example.com", Groups: longGroups(20, 200)}, http.StatusForbidden},
		{"in none of allowed_groups", func(o *OIDCConfig) { o.AllowedGroups = []string{"approvers", "sre"} }, testkit.OIDCUser{Email: "a@example.com", Groups: []string{"dev"}}, http.StatusForbidden},
		{"no groups, allowed_groups set", func(o *OIDCConfig) { o.AllowedGroups = []string{"approvers"} }, testkit.OIDCUser{Email: "a@example.com"}, http.StatusForbidden},
		{"user_claim missing", func(o *OIDCConfig) { o.UserClaim = "preferred_username" }, testkit.OIDCUser{Email: "a@example.com"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newListener(t, tt.change)
			l.idp.SetUser(tt.user)
			c := stepper(t)
			cb := l.toCallback(t, c)
			res, body := get(t, c, cb.String())
			if res.StatusCode != tt.status {
				t.Errorf("callback: %d, want %d: %s", res.StatusCode, tt.status, body)
			}
			if sc := cookieOf(res, SessionCookie); sc != nil {
				t.Errorf("a refused sign-in sets a session cookie: %+v", sc)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("Content-Type %q", ct)
			}
			_, body = get(t, c, l.URL+"/approvals")
			if !strings.Contains(body, ErrNoIdentity.Error()) {
				t.Errorf("after a refused sign-in: %q", body)
			}
		})
	}
}

func TestOIDCAccepted(t *testing.T) {
	tests := []struct {
		name   string
		change func(*OIDCConfig)
		user   testkit.OIDCUser
		want   string
	}{
		{
			"in allowed_groups", func(o *OIDCConfig) { o.AllowedGroups = []string{"approvers", "sre"} },
			testkit.OIDCUser{Email: "a@example.com", Groups: []string{"dev", "sre"}},
			"a@example.com [dev sre]",
		},
		{
			"user_claim and groups_claim", func(o *OIDCConfig) { o.UserClaim = "preferred_username"; o.GroupsClaim = "roles" },
			testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"preferred_username": "alice", "roles": "admin"}},
			"alice [admin]",
		},
		{"no groups", nil, testkit.OIDCUser{Email: "a@example.com"}, "a@example.com []"},
		{"several audiences, azp this client", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"aud": []string{"toolgate", "other"}, "azp": "toolgate"}}, "a@example.com []"},
		{"issued within the clock skew", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"iat": time.Now().Add(30 * time.Second).Unix()}}, "a@example.com []"},
		{"email_verified absent", nil, testkit.OIDCUser{Email: "a@example.com", Claims: map[string]any{"email_verified": nil}}, "a@example.com []"},
		{"email_verified not asked of sub", func(o *OIDCConfig) { o.UserClaim = "sub" }, testkit.OIDCUser{Subject: "u-9", Email: "x@example.com", Claims: map[string]any{"email_verified": false}}, "u-9 []"},
		{"sub as user", func(o *OIDCConfig) { o.UserClaim = "sub" }, testkit.OIDCUser{Subject: "u-123", Email: "x@example.com"}, "u-123 []"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newListener(t, tt.change)
			l.idp.SetUser(tt.user)
			res, body := l.signIn(t, testkit.Browser(t), "/approvals")
			if want := "/approvals " + tt.want + " via oidc"; res.StatusCode != http.StatusOK || body != want {
				t.Errorf("got %d %q, want %q", res.StatusCode, body, want)
			}
		})
	}
}

func TestOIDCState(t *testing.T) {
	l := newListener(t, nil)
	t.Run("state mismatch", func(t *testing.T) {
		c := stepper(t)
		cb := l.toCallback(t, c)
		q := cb.Query()
		q.Set("state", q.Get("state")+"x")
		cb.RawQuery = q.Encode()
		if res, body := get(t, c, cb.String()); res.StatusCode != http.StatusBadRequest || cookieOf(res, SessionCookie) != nil {
			t.Errorf("callback with another state: %d %s", res.StatusCode, body)
		}
	})
	t.Run("state twice", func(t *testing.T) {
		c := stepper(t)
		cb := l.toCallback(t, c)
		cb.RawQuery += "&state=again"
		if res, _ := get(t, c, cb.String()); res.StatusCode != http.StatusBadRequest {
			t.Errorf("callback with two states: %d", res.StatusCode)
		}
	})
	t.Run("another browser", func(t *testing.T) {
		cb := l.toCallback(t, stepper(t))
		if res, _ := get(t, stepper(t), cb.String()); res.StatusCode != http.StatusBadRequest {
			t.Errorf("callback without the sign-in cookie: %d", res.StatusCode)
		}
	})
	t.Run("another sign-in's cookie", func(t *testing.T) {
		// The attacker's own code and state, in the victim's browser
		// (login CSRF): the victim's sign-in cookie holds another state.
		cb := l.toCallback(t, stepper(t))
		victim := stepper(t)
		l.toCallback(t, victim)
		if res, _ := get(t, victim, cb.String()); res.StatusCode != http.StatusBadRequest {
			t.Errorf("callback of another sign-in: %d", res.StatusCode)
		}
	})
	t.Run("two sign-in cookies", func(t *testing.T) {
		// The attacker's own sign-in cookie planted beside the victim's
		// (from a sibling domain): which state is whose cannot be told.
		attacker := stepper(t)
		cb := l.toCallback(t, attacker)
		victim := stepper(t)
		l.toCallback(t, victim)
		u, _ := url.Parse(l.URL + "/auth/callback")
		for _, ck := range attacker.Jar.Cookies(u) {
			if ck.Name == loginCookie {
				victim.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Value: ck.Value, Path: "/auth/callback"}})
			}
		}
		if n := len(victim.Jar.Cookies(u)); n != 2 {
			t.Fatalf("the victim's browser holds %d cookies", n)
		}
		if res, _ := get(t, victim, cb.String()); res.StatusCode != http.StatusBadRequest || cookieOf(res, SessionCookie) != nil {
			t.Errorf("callback with two sign-in cookies: %d", res.StatusCode)
		}
	})
	t.Run("sign-in expired", func(t *testing.T) {
		c := stepper(t)
		cb := l.toCallback(t, c)
		l.clock.Advance(loginTTL + time.Second)
		defer l.clock.Advance(-loginTTL - time.Second)
		if res, _ := get(t, c, cb.String()); res.StatusCode != http.StatusBadRequest {
			t.Errorf("callback after the sign-in expired: %d", res.StatusCode)
		}
	})
	t.Run("provider error", func(t *testing.T) {
		c := stepper(t)
		cb := l.toCallback(t, c)
		q := cb.Query()
		q.Del("code")
		q.Set("error", "access_denied")
		cb.RawQuery = q.Encode()
		if res, _ := get(t, c, cb.String()); res.StatusCode != http.StatusForbidden {
			t.Errorf("callback with access_denied: %d", res.StatusCode)
		}
	})
	t.Run("no code", func(t *testing.T) {
		c := stepper(t)
		cb := l.toCallback(t, c)
		q := cb.Query()
		q.Del("code")
		cb.RawQuery = q.Encode()
		if res, _ := get(t, c, cb.String()); res.StatusCode != http.StatusBadRequest {
			t.Errorf("callback without a code: %d", res.StatusCode)
		}
	})
}

func TestOIDCSession(t *testing.T) {
	l := newListener(t, func(o *OIDCConfig) { o.SessionTTL = time.Hour })
	c := stepper(t)
	res, _ := get(t, c, l.toCallback(t, c).String())
	sc := cookieOf(res, SessionCookie)
	if sc == nil {
		t.Fatalf("no session cookie: %d", res.StatusCode)
	}
	identify := func(value string) error {
		r := httptest.NewRequest(http.MethodGet, "/approvals", nil)
		r.AddCookie(&http.Cookie{Name: SessionCookie, Value: value})
		_, err := l.auth.Identify(r)
		return err
	}
	if err := identify(sc.Value); err != nil {
		t.Fatalf("Identify: %v", err)
	}

	payload, sig, _ := strings.Cut(sc.Value, ".")
	forged, err := newSealer("another-secret-0123456789abcdefghijkl", "session").seal(session{Name: "mallory", Expires: l.clock.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	login, err := newSealer(cookieSecret, "login").seal(session{Name: "mallory", Expires: l.clock.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{
		"tampered payload":       flip(payload) + "." + sig,
		"tampered signature":     payload + "." + flip(sig),
		"no signature":           payload,
		"empty":                  "",
		"another secret":         forged,
		"sealed for the sign-in": login,
		"signature of another":   strings.SplitN(forged, ".", 2)[0] + "." + sig,
	} {
		if err := identify(v); !errors.Is(err, ErrNoIdentity) {
			t.Errorf("%s: Identify = %v, want ErrNoIdentity", name, err)
		}
	}

	// A forged cookie beside the real one does not hide it.
	r := httptest.NewRequest(http.MethodGet, "/approvals", nil)
	r.AddCookie(&http.Cookie{Name: SessionCookie, Value: forged})
	r.AddCookie(sc)
	if a, err := l.auth.Identify(r); err != nil || a.Name != "alice@example.com" {
		t.Errorf("Identify with a forged and a real cookie = %+v, %v", a, err)
	}
	// Two valid sessions: one was planted (a sibling domain can set a
	// cookie of that name), and which is whose cannot be told.
	other, err := newSealer(cookieSecret, "session").seal(session{Name: "mallory", Expires: l.clock.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range [][]string{{other, sc.Value}, {sc.Value, other}, {sc.Value, sc.Value}} {
		r := httptest.NewRequest(http.MethodGet, "/approvals", nil)
		for _, v := range order {
			r.AddCookie(&http.Cookie{Name: SessionCookie, Value: v})
		}
		if a, err := l.auth.Identify(r); !errors.Is(err, ErrNoIdentity) {
			t.Errorf("Identify with two valid session cookies = %+v, %v; want ErrNoIdentity", a, err)
		}
	}

	l.clock.Advance(time.Hour - time.Second)
	if err := identify(sc.Value); err != nil {
		t.Errorf("just before expiry: %v", err)
	}
	l.clock.Advance(time.Second)
	if err := identify(sc.Value); !errors.Is(err, ErrNoIdentity) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("at expiry: %v", err)
	}
}

// TestOIDCSessionOutsideAllowedGroups: allowed_groups is checked at each
// request, not only at sign-in, so narrowing it takes effect at once.
func TestOIDCSessionOutsideAllowedGroups(t *testing.T) {
	l := newListener(t, func(o *OIDCConfig) { o.AllowedGroups = []string{"approvers"} })
	for groups, ok := range map[string]bool{"approvers": true, "outsiders": false, "": false} {
		v, err := newSealer(cookieSecret, "session").seal(session{Name: "bob@example.com", Groups: strings.Fields(groups), Expires: l.clock.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/approvals", nil)
		r.AddCookie(&http.Cookie{Name: SessionCookie, Value: v})
		_, err = l.auth.Identify(r)
		if ok && err != nil || !ok && !errors.Is(err, ErrNoIdentity) {
			t.Errorf("a session with groups %q: Identify = %v, want admitted %v", groups, err, ok)
		}
	}
}

// TestOIDCProviderDownAtTheCallback: the provider was reached for
// discovery and sign-in, then fails when the code is exchanged: 503 with
// Retry-After, as when discovery fails, not a refusal of the sign-in.
func TestOIDCProviderDownAtTheCallback(t *testing.T) {
	l := newListener(t, nil)
	c := stepper(t)
	cb := l.toCallback(t, c)
	l.idp.SetDown(true)
	res, body := get(t, c, cb.String())
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || cookieOf(res, SessionCookie) != nil {
		t.Fatalf("callback with the provider down: %d, Retry-After %q\n%s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
}

// flip changes the first character of s.
func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func TestOIDCLogout(t *testing.T) {
	l := newListener(t, nil)
	c := testkit.Browser(t)
	l.signIn(t, c, "/approvals")

	post := func(h http.Header) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, l.URL+"/auth/logout", nil)
		req.Header = h
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := post(http.Header{"Sec-Fetch-Site": {"cross-site"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site logout: %d", res.StatusCode)
	}
	if res := post(http.Header{"Origin": {"https://evil.example"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("logout from another origin: %d", res.StatusCode)
	}
	if _, body := get(t, c, l.URL+"/approvals"); !strings.Contains(body, "alice@example.com") {
		t.Fatalf("a refused logout signed out: %q", body)
	}
	if res, _ := get(t, c, l.URL+"/auth/logout"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /auth/logout: %d", res.StatusCode)
	}
	res := post(http.Header{"Sec-Fetch-Site": {"same-origin"}})
	if sc := cookieOf(res, SessionCookie); res.StatusCode != http.StatusOK || sc == nil || sc.MaxAge >= 0 {
		t.Errorf("logout: %d, cookie %+v", res.StatusCode, sc)
	}
	if res, _ := get(t, c, l.URL+"/approvals"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %d", res.StatusCode)
	}
}

// TestOIDCLazyDiscovery: an unreachable provider neither blocks nor fails
// the start; sign-in answers 503 until it is back, trying again at most
// every discoveryBackoff.
func TestOIDCLazyDiscovery(t *testing.T) {
	const discovery = "GET /.well-known/openid-configuration"
	idp := testkit.NewOIDCProvider(t, "toolgate", "client-secret-0123")
	idp.SetDown(true)
	clock := testkit.NewClock(time.Now())
	a, err := New(Config{Type: TypeOIDC, OIDC: OIDCConfig{
		Issuer: idp.URL, ClientID: "toolgate", ClientSecret: "client-secret-0123",
		PublicURL: "http://toolgate.test", CookieSecret: cookieSecret, Now: clock.Now, AllowedGroups: []string{"dev"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := idp.Hits(discovery); n != 0 {
		t.Errorf("New fetched the discovery document %d times", n)
	}
	login := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		a.Routes().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/login?return=/approvals", nil))
		return w
	}
	w := login()
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "identity provider") {
		t.Errorf("login while the provider is down: %d %q", w.Code, w.Body.String())
	}
	idp.SetDown(false)
	if w := login(); w.Code != http.StatusServiceUnavailable || idp.Hits(discovery) != 1 {
		t.Errorf("login within the back-off: %d, %d discovery requests", w.Code, idp.Hits(discovery))
	}
	clock.Advance(discoveryBackoff)
	if w := login(); w.Code != http.StatusFound || idp.Hits(discovery) != 2 {
		t.Errorf("login after the back-off: %d, %d discovery requests", w.Code, idp.Hits(discovery))
	}
	if w := login(); w.Code != http.StatusFound || idp.Hits(discovery) != 2 {
		t.Errorf("discovery is not remembered: %d, %d discovery requests", w.Code, idp.Hits(discovery))
	}
}

func TestOIDCUnreachableIssuer(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	a, err := New(Config{Type: TypeOIDC, OIDC: OIDCConfig{
		Issuer: dead.URL, ClientID: "toolgate", ClientSecret: "s", PublicURL: "http://toolgate.test", CookieSecret: cookieSecret,
		AllowedGroups: []string{"dev"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	a.Routes().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/login", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("login with the issuer unreachable: %d", w.Code)
	}
}

// TestOIDCSecureFollowsScheme: behind https the cookies are Secure;
// browsers do not send Secure cookies over plain http, so on an http
// public URL they are not.
func TestOIDCSecureFollowsScheme(t *testing.T) {
	for publicURL, secure := range map[string]bool{"https://toolgate.example.com/gate/": true, "http://127.0.0.1:8081": false} {
		l := newListener(t, func(o *OIDCConfig) { o.PublicURL = publicURL; o.RedirectURL = "" })
		w := httptest.NewRecorder()
		l.auth.Routes().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/login?return=/approvals/1", nil))
		name := loginCookie
		if secure {
			name = hostPrefix + loginCookie
		}
		lc := cookieOf(&http.Response{Header: w.Header()}, name)
		if w.Code != http.StatusFound || lc == nil || lc.Secure != secure {
			t.Errorf("%s: %d, sign-in cookie %+v", publicURL, w.Code, lc)
		}
		if u, _ := url.Parse(w.Header().Get("Location")); u.Query().Get("redirect_uri") != strings.TrimRight(publicURL, "/")+"/auth/callback" {
			t.Errorf("%s: redirect_uri %s", publicURL, u.Query().Get("redirect_uri"))
		}
	}
	l := newListener(t, func(o *OIDCConfig) { o.PublicURL = "http://toolgate.example.com/gate/" })
	if got, want := l.auth.LoginURL("/approvals/1"), "/gate/auth/login?return=%2Fapprovals%2F1"; got != want {
		t.Errorf("LoginURL = %q, want %q", got, want)
	}
	if lc := cookiePath(t, l); lc != "/gate/auth/" {
		t.Errorf("sign-in cookie path %q", lc)
	}
}

// TestOIDCHostCookies: behind https both cookies carry the __Host- prefix,
// so that browsers take them only from this host, Secure, for Path=/ and
// without Domain: a sibling subdomain cannot plant a session or a sign-in.
func TestOIDCHostCookies(t *testing.T) {
	const public = "https://toolgate.example.com/gate"
	l := newListener(t, func(o *OIDCConfig) { o.PublicURL = public })
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		l.auth.Routes().ServeHTTP(w, r)
		return w
	}
	hostCookie := func(w *httptest.ResponseRecorder, name string) *http.Cookie {
		t.Helper()
		for _, raw := range w.Header().Values("Set-Cookie") {
			if strings.Contains(strings.ToLower(raw), "domain=") {
				t.Errorf("Set-Cookie with a Domain: %s", raw)
			}
		}
		c := cookieOf(&http.Response{Header: w.Header()}, name)
		if c == nil || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
			t.Fatalf("cookie %s: %+v in %q", name, c, w.Header().Values("Set-Cookie"))
		}
		return c
	}

	w := serve(httptest.NewRequest(http.MethodGet, "/auth/login?return=/approvals/1", nil))
	if w.Code != http.StatusFound {
		t.Fatalf("login: %d", w.Code)
	}
	lc := hostCookie(w, "__Host-toolgate_signin")
	res, _ := get(t, stepper(t), w.Header().Get("Location"))
	cb, err := url.Parse(res.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(cb.String(), public+"/auth/callback?") {
		t.Fatalf("the provider sends the browser to %q", res.Header.Get("Location"))
	}

	// Without the prefix, the same sign-in cookie is somebody else's.
	r := httptest.NewRequest(http.MethodGet, "/auth/callback?"+cb.RawQuery, nil)
	r.AddCookie(&http.Cookie{Name: loginCookie, Value: lc.Value})
	if w := serve(r); w.Code != http.StatusBadRequest {
		t.Errorf("callback with the sign-in cookie unprefixed: %d", w.Code)
	}

	r = httptest.NewRequest(http.MethodGet, "/auth/callback?"+cb.RawQuery, nil)
	r.AddCookie(lc)
	w = serve(r)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || loc != public+"/approvals/1" {
		t.Fatalf("callback: %d to %q: %s", w.Code, loc, w.Body)
	}
	sc := hostCookie(w, "__Host-toolgate_session")
	if cleared := hostCookie(w, "__Host-toolgate_signin"); cleared.MaxAge >= 0 {
		t.Errorf("the callback leaves the sign-in cookie: %+v", cleared)
	}

	identify := func(cs ...*http.Cookie) error {
		r := httptest.NewRequest(http.MethodGet, "/approvals", nil)
		for _, c := range cs {
			r.AddCookie(c)
		}
		_, err := l.auth.Identify(r)
		return err
	}
	if err := identify(sc); err != nil {
		t.Errorf("Identify: %v", err)
	}
	if err := identify(&http.Cookie{Name: SessionCookie, Value: sc.Value}); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("Identify with the session unprefixed = %v, want ErrNoIdentity", err)
	}
	if err := identify(sc, sc); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("Identify with two sessions = %v, want ErrNoIdentity", err)
	}

	w = httptest.NewRecorder()
	r = httptest.NewRequest(http.MethodPost, "/auth/logout", nil)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	l.auth.Routes().ServeHTTP(w, r)
	if c := hostCookie(w, "__Host-toolgate_session"); w.Code != http.StatusOK || c.MaxAge >= 0 {
		t.Errorf("logout: %d, %+v", w.Code, c)
	}
}

func cookiePath(t *testing.T, l *listener) string {
	t.Helper()
	w := httptest.NewRecorder()
	l.auth.Routes().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/login", nil))
	if lc := cookieOf(&http.Response{Header: w.Header()}, loginCookie); lc != nil {
		return lc.Path
	}
	return ""
}

// longGroups returns n distinct groups of size bytes.
func longGroups(n, size int) []string {
	gs := make([]string, n)
	for i := range gs {
		gs[i] = fmt.Sprintf("%03d", i) + strings.Repeat("g", size-3)
	}
	return gs
}
