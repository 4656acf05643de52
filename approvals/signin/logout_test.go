package signin

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// endSessionListener is a listener whose provider advertises its own
// end_session_endpoint, with the listener's signed-out page registered.
func endSessionListener(t *testing.T, change func(*OIDCConfig)) *listener {
	t.Helper()
	l := newListener(t, change)
	l.idp.SetEndSession(l.idp.URL+"/logout", l.URL+SignedOutPath)
	return l
}

// postLogout posts to /auth/logout from c with the headers h, and returns
// the answer with its body read.
func postLogout(t *testing.T, c *http.Client, l *listener, h http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, l.URL+"/auth/logout", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	res, err := c.Do(req)
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

// jwtClaims decodes the payload of a JWT without checking it.
func jwtClaims(t *testing.T, raw string) map[string]any {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("%q is not a JWT", raw)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOIDCLogoutEndsProviderSession: with an end_session_endpoint
// advertised, sign-out removes the cookie and sends the browser (303) to
// the endpoint with client_id, post_logout_redirect_uri and the sign-in's
// ID token as id_token_hint; the provider sends it back to the signed-out
// page, which sets no cookie.
func TestOIDCLogoutEndsProviderSession(t *testing.T) {
	l := endSessionListener(t, nil)
	c := testkit.Browser(t)
	if res, body := l.signIn(t, c, "/approvals"); res.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", res.StatusCode, body)
	}

	// Cross-origin posts are still refused, and sign nobody out anywhere.
	for _, h := range []http.Header{{"Sec-Fetch-Site": {"cross-site"}}, {"Origin": {"https://evil.example"}}} {
		if res, _ := postLogout(t, c, l, h); res.StatusCode != http.StatusForbidden || res.Header.Get("Location") != "" {
			t.Errorf("logout with %v: %d to %q", h, res.StatusCode, res.Header.Get("Location"))
		}
	}
	if _, body := get(t, c, l.URL+"/approvals"); !strings.Contains(body, "alice@example.com") {
		t.Fatalf("a refused logout signed out: %q", body)
	}

	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, body := postLogout(t, c, l, http.Header{"Origin": {l.URL}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d %s", res.StatusCode, body)
	}
	if sc := cookieOf(res, SessionCookie); sc == nil || sc.MaxAge >= 0 || sc.Value != "" {
		t.Errorf("logout leaves the session cookie: %+v", sc)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	to, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	q := to.Query()
	if got := to.Scheme + "://" + to.Host + to.Path; got != l.idp.URL+"/logout" {
		t.Errorf("logout sends the browser to %s", to)
	}
	if q.Get("client_id") != "toolgate" || q.Get("post_logout_redirect_uri") != l.URL+"/auth/signed-out" || q.Has("state") {
		t.Errorf("logout parameters %v", q)
	}
	hint := jwtClaims(t, q.Get("id_token_hint"))
	if hint["iss"] != l.idp.URL || hint["aud"] != "toolgate" || hint["email"] != "alice@example.com" {
		t.Errorf("id_token_hint claims %v", hint)
	}

	// The provider takes it, and sends the browser back to the page that
	// says so.
	c.CheckRedirect = nil
	res, body = get(t, c, to.String())
	if res.StatusCode != http.StatusOK || res.Request.URL.String() != l.URL+"/auth/signed-out" || !strings.Contains(body, "<h1>Signed out</h1>") {
		t.Errorf("after the provider: %d at %s\n%s", res.StatusCode, res.Request.URL, body)
	}
	if sc := res.Header.Values("Set-Cookie"); len(sc) != 0 {
		t.Errorf("the signed-out page sets cookies: %q", sc)
	}
	if n := len(l.idp.Logouts()); n != 1 {
		t.Errorf("the provider received %d logouts", n)
	}
	if res, _ := get(t, c, l.URL+"/approvals"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %d", res.StatusCode)
	}
}

// TestOIDCLogoutHintBounded: an ID token that would make the session
// cookie too large is not kept; sign-in still works, and sign-out sends
// client_id alone to name the client.
func TestOIDCLogoutHintBounded(t *testing.T) {
	l := endSessionListener(t, nil)
	// Groups that fit in the cookie once, not twice (the ID token holds
	// them too).
	l.idp.SetUser(testkit.OIDCUser{Email: "alice@example.com", Groups: longGroups(8, 200)})
	c := stepper(t)
	res, body := get(t, c, l.toCallback(t, c).String())
	sc := cookieOf(res, SessionCookie)
	if res.StatusCode != http.StatusSeeOther || sc == nil {
		t.Fatalf("sign-in: %d %s", res.StatusCode, body)
	}
	if len(sc.Value) > maxSessionCookieBytes {
		t.Errorf("session cookie of %d bytes", len(sc.Value))
	}
	res, _ = postLogout(t, c, l, http.Header{"Sec-Fetch-Site": {"same-origin"}})
	to, _ := url.Parse(res.Header.Get("Location"))
	if q := to.Query(); res.StatusCode != http.StatusSeeOther || q.Has("id_token_hint") || q.Get("client_id") != "toolgate" ||
		q.Get("post_logout_redirect_uri") != l.URL+"/auth/signed-out" {
		t.Errorf("logout: %d to %s", res.StatusCode, to)
	}

	// Without a session at all, sign-out still ends the provider's.
	res, _ = postLogout(t, stepper(t), l, http.Header{"Sec-Fetch-Site": {"same-origin"}})
	if to, _ := url.Parse(res.Header.Get("Location")); res.StatusCode != http.StatusSeeOther || to.Query().Get("client_id") != "toolgate" {
		t.Errorf("logout without a session: %d to %s", res.StatusCode, to)
	}
}

// TestOIDCLogoutWithoutEndpoint: a provider that advertises no
// end_session_endpoint (or an unusable one), or KeepProviderSession, leaves
// sign-out as it was: the cookie removed, a page, no redirect, and no ID
// token kept in the cookie.
func TestOIDCLogoutWithoutEndpoint(t *testing.T) {
	tests := []struct {
		name     string
		endpoint func(idp string) string
		change   func(*OIDCConfig)
	}{
		{"none advertised", func(string) string { return "" }, nil},
		{"KeepProviderSession", func(idp string) string { return idp + "/logout" }, func(o *OIDCConfig) { o.KeepProviderSession = true }},
		{"http off loopback", func(string) string { return "http://idp.example/logout" }, nil},
		{"with credentials", func(idp string) string { return strings.Replace(idp, "://", "://u:p@", 1) + "/logout" }, nil},
		{"not a URL", func(string) string { return "javascript:alert(1)" }, nil},
		{"relative", func(string) string { return "/logout" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newListener(t, tt.change)
			l.idp.SetEndSession(tt.endpoint(l.idp.URL), l.URL+SignedOutPath)
			c := stepper(t)
			res, _ := get(t, c, l.toCallback(t, c).String())
			sc := cookieOf(res, SessionCookie)
			if sc == nil {
				t.Fatalf("sign-in: %d", res.StatusCode)
			}
			var s session
			if err := l.auth.(*oidcAuth).cookies.session.open(sc.Value, &s); err != nil || s.IDToken != "" {
				t.Errorf("session %+v, %v: an ID token kept for nothing", s, err)
			}
			res, body := postLogout(t, c, l, http.Header{"Sec-Fetch-Site": {"same-origin"}})
			if sc := cookieOf(res, SessionCookie); res.StatusCode != http.StatusOK || res.Header.Get("Location") != "" ||
				res.Header.Get("Refresh") != "" || sc == nil || sc.MaxAge >= 0 {
				t.Errorf("logout: %d to %q, cookie %+v\n%s", res.StatusCode, res.Header.Get("Location"), sc, body)
			}
			if n := len(l.idp.Logouts()); n != 0 {
				t.Errorf("the provider received %d logouts", n)
			}
		})
	}
}

// TestOIDCLogoutOtherOrigin: an end_session_endpoint on another origin
// than the issuer's is beyond the pages' form-action, so browsers would
// stop the sign-out form's redirect there: the answer is a page that
// refreshes to it instead.
func TestOIDCLogoutOtherOrigin(t *testing.T) {
	l := newListener(t, nil)
	other := strings.Replace(l.idp.URL, "127.0.0.1", "localhost", 1) + "/logout"
	l.idp.SetEndSession(other, l.URL+SignedOutPath)
	if got := l.auth.LogoutOrigins(); len(got) != 1 || got[0] != l.idp.URL {
		t.Errorf("LogoutOrigins = %q, want the issuer's origin %s", got, l.idp.URL)
	}
	c := stepper(t)
	get(t, c, l.toCallback(t, c).String())
	res, body := postLogout(t, c, l, http.Header{"Sec-Fetch-Site": {"same-origin"}})
	refresh := res.Header.Get("Refresh")
	to, err := url.Parse(strings.TrimPrefix(refresh, "0; url="))
	if err != nil || res.StatusCode != http.StatusOK || !strings.HasPrefix(refresh, "0; url="+other+"?") || res.Header.Get("Location") != "" {
		t.Fatalf("logout: %d, Refresh %q\n%s", res.StatusCode, refresh, body)
	}
	if q := to.Query(); q.Get("client_id") != "toolgate" || q.Get("post_logout_redirect_uri") != l.URL+"/auth/signed-out" || q.Get("id_token_hint") == "" {
		t.Errorf("logout parameters %v", q)
	}
	if sc := cookieOf(res, SessionCookie); sc == nil || sc.MaxAge >= 0 {
		t.Errorf("logout leaves the session cookie: %+v", sc)
	}
	if !strings.Contains(body, `href="`+strings.ReplaceAll(to.String(), "&", "&amp;")+`"`) {
		t.Errorf("the page offers no link to the provider\n%s", body)
	}
	if got := newListener(t, func(o *OIDCConfig) { o.KeepProviderSession = true }).auth.LogoutOrigins(); got != nil {
		t.Errorf("LogoutOrigins with KeepProviderSession = %q", got)
	}
}

// TestOIDCLogoutProviderDown: sign-out before the provider was ever
// reached, while it is down, still removes the cookie, and says that the
// provider's session may be open.
func TestOIDCLogoutProviderDown(t *testing.T) {
	l := endSessionListener(t, nil)
	l.idp.SetDown(true)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/auth/logout", nil)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	l.auth.Routes().ServeHTTP(w, r)
	sc := cookieOf(&http.Response{Header: w.Header()}, SessionCookie)
	if w.Code != http.StatusOK || sc == nil || sc.MaxAge >= 0 || !strings.Contains(w.Body.String(), "toolgate only") {
		t.Errorf("logout with the provider down: %d, cookie %+v\n%s", w.Code, sc, w.Body)
	}
}

// TestOIDCSignedOutPage: GET /auth/signed-out shows a page and changes
// nothing: no cookie set or removed, nobody signed in, whatever the query.
func TestOIDCSignedOutPage(t *testing.T) {
	l := endSessionListener(t, nil)
	serve := func(method, target string, cs ...*http.Cookie) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, target, nil)
		for _, c := range cs {
			r.AddCookie(c)
		}
		l.auth.Routes().ServeHTTP(w, r)
		return w
	}
	for _, target := range []string{"/auth/signed-out", "/auth/signed-out?state=x&code=y"} {
		w := serve(http.MethodGet, target)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "<h1>Signed out</h1>") ||
			!strings.Contains(w.Body.String(), `<a href="/auth/login">Sign in</a>`) || len(w.Header().Values("Set-Cookie")) != 0 ||
			w.Header().Get("Cache-Control") != "no-store" || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %q\n%s", target, w.Code, w.Header(), w.Body)
		}
	}
	if w := serve(http.MethodHead, "/auth/signed-out"); w.Code != http.StatusOK || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Errorf("HEAD: %d %q", w.Code, w.Header())
	}
	if w := serve(http.MethodPost, "/auth/signed-out"); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.Code)
	}

	// A browser signed in (again) is told so, and stays signed in.
	c := stepper(t)
	res, _ := get(t, c, l.toCallback(t, c).String())
	sc := cookieOf(res, SessionCookie)
	if sc == nil {
		t.Fatalf("sign-in: %d", res.StatusCode)
	}
	w := serve(http.MethodGet, "/auth/signed-out", sc)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Still signed in") || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Errorf("GET with a session: %d %q\n%s", w.Code, w.Header(), w.Body)
	}
}

func TestSignedOutURL(t *testing.T) {
	for _, tt := range []struct{ public, redirect, want string }{
		{"https://toolgate.example.com", "", "https://toolgate.example.com/auth/signed-out"},
		{"https://toolgate.example.com/gate/", "https://toolgate.example.com/gate/auth/callback", "https://toolgate.example.com/gate/auth/signed-out"},
		{"", "https://toolgate.example.com/p/auth/callback?x=1#f", "https://toolgate.example.com/p/auth/signed-out"},
	} {
		l := newListener(t, func(o *OIDCConfig) { o.PublicURL, o.RedirectURL = tt.public, tt.redirect })
		if got := l.auth.(*oidcAuth).signedOutURL; got != tt.want {
			t.Errorf("public_url %q, redirect_url %q: %q, want %q", tt.public, tt.redirect, got, tt.want)
		}
	}
}
