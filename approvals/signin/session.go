package signin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// Cookie names. The session cookie is what Identify reads; the sign-in
// cookie lives only between /auth/login and /auth/callback. Behind an
// https public URL both names carry hostPrefix.
const (
	SessionCookie = "toolgate_session"
	loginCookie   = "toolgate_signin"
)

// hostPrefix makes browsers accept a cookie only when it is Secure, has
// Path=/ and no Domain, and was set over https by this very host. Without
// it, a sibling subdomain (another app under the same parent domain) could
// set a cookie of the same name for this host: its own session, or its own
// sign-in to finish in the approver's browser (login CSRF).
const hostPrefix = "__Host-"

// maxSessionCookieBytes caps the session cookie's value. Browsers keep at
// most about 4096 bytes per cookie, name and attributes included, and drop
// a larger one without a word: the approver would be signed in and
// immediately signed out again.
const maxSessionCookieBytes = 3584

// loginTTL is how long a started sign-in may take at the identity provider.
const loginTTL = 10 * time.Minute

// errCookie: a cookie that is malformed, forged, or for another purpose.
var errCookie = errors.New("cookie is malformed or its signature does not match")

// sealer signs values into cookie values and checks them back. The value is
// base64url(JSON) "." base64url(HMAC-SHA256(key, first part)). It is
// signed, not encrypted: what it holds (a name, groups, a sign-in's state)
// is the approver's own, and HttpOnly keeps it from scripts.
type sealer struct{ key []byte }

// newSealer derives a key for one purpose from the cookie secret, so that a
// value sealed for one purpose (a sign-in) never opens as another (a
// session).
func newSealer(secret, purpose string) sealer {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("toolgate/signin/" + purpose))
	return sealer{key: m.Sum(nil)}
}

func (s sealer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// seal returns v signed.
func (s sealer) seal(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	p := base64.RawURLEncoding.EncodeToString(b)
	return p + "." + base64.RawURLEncoding.EncodeToString(s.mac(p)), nil
}

// open checks the signature of value and decodes it into v.
func (s sealer) open(value string, v any) error {
	p, sig, ok := strings.Cut(value, ".")
	if !ok {
		return errCookie
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(p)) {
		return errCookie
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return errCookie
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errCookie
	}
	return nil
}

// session is the payload of the session cookie.
type session struct {
	Name    string   `json:"n"`
	Groups  []string `json:"g,omitempty"`
	Expires int64    `json:"e"` // Unix seconds
	// IDToken is the ID token of the sign-in, kept only to be sent back
	// as id_token_hint when sign-out ends the provider's session, and
	// only when the cookie still fits with it (setSessionWithHint).
	IDToken string `json:"t,omitempty"`
}

// loginState is the payload of the sign-in cookie: what /auth/callback
// needs to finish the sign-in /auth/login started.
type loginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"` // the PKCE code verifier
	Return   string `json:"r"` // a local path
	Expires  int64  `json:"e"` // Unix seconds
}

// cookies writes and reads the two cookies of oidc.
type cookies struct {
	session, login sealer
	secure         bool   // Secure attribute: the public URL is https
	sessionName    string // SessionCookie, with hostPrefix when secure
	loginName      string // loginCookie, with hostPrefix when secure
	loginPath      string // path of the sign-in cookie: the /auth/ routes, or / when secure
	now            func() time.Time
}

// newCookies returns the cookies of a listener whose links start with base
// (the public URL's path); secure says whether approvers reach it over
// https.
func newCookies(secret, base string, secure bool, now func() time.Time) cookies {
	c := cookies{
		session: newSealer(secret, "session"), login: newSealer(secret, "login"),
		secure: secure, sessionName: SessionCookie, loginName: loginCookie,
		loginPath: base + "/auth/", now: now,
	}
	if secure {
		// __Host- wants Path=/: the sign-in cookie then travels with
		// every request for its ten minutes, a small price for a state
		// that no neighbour can plant.
		c.sessionName, c.loginName, c.loginPath = hostPrefix+SessionCookie, hostPrefix+loginCookie, "/"
	}
	return c
}

// setSession sets the session cookie for s. It fails, setting nothing, when
// the cookie would be too large for browsers to keep.
func (c cookies) setSession(w http.ResponseWriter, s session) error {
	v, err := c.session.seal(s)
	if err != nil {
		return err
	}
	if len(v) > maxSessionCookieBytes {
		return errTooLarge
	}
	http.SetCookie(w, &http.Cookie{
		Name: c.sessionName, Value: v, Path: "/",
		Expires: time.Unix(s.Expires, 0), MaxAge: int(time.Unix(s.Expires, 0).Sub(c.now().Truncate(time.Second)).Seconds()),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
	return nil
}

var errTooLarge = errors.New("session cookie too large")

// setSessionWithHint sets the session cookie for s with the ID token
// idToken in it when the cookie fits with it, and without it otherwise: the
// hint makes sign-out at the identity provider smoother, but a sign-in is
// never refused, nor groups given less room, for its sake.
func (c cookies) setSessionWithHint(w http.ResponseWriter, s session, idToken string) error {
	if idToken != "" {
		withHint := s
		withHint.IDToken = idToken
		if err := c.setSession(w, withHint); !errors.Is(err, errTooLarge) {
			return err
		}
	}
	return c.setSession(w, s)
}

// clearSession removes the session cookie.
func (c cookies) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: c.sessionName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// readSession returns the approver of r's session cookie, or an error
// wrapping ErrNoIdentity: no cookie, a forged or malformed one, an expired
// one, or more than one valid one. Cookies of that name that do not open
// are ignored; two that do mean one was planted (over http a sibling
// domain can set a cookie of that name), and which is whose cannot be
// told.
func (c cookies) readSession(r *http.Request) (Approver, error) {
	s, err := c.validSession(r)
	if err != nil {
		return Approver{}, err
	}
	return Approver{Name: s.Name, Groups: s.Groups, Via: ViaOIDC}, nil
}

// idTokenHint returns the ID token kept in r's session cookie, "" when
// there is none, or no single valid session to take it from.
func (c cookies) idTokenHint(r *http.Request) string {
	s, err := c.validSession(r)
	if err != nil {
		return ""
	}
	return s.IDToken
}

// validSession returns the one valid session among r's session cookies;
// readSession says what counts.
func (c cookies) validSession(r *http.Request) (session, error) {
	cs := r.CookiesNamed(c.sessionName)
	if len(cs) == 0 {
		return session{}, noIdentity("no session cookie")
	}
	err := noIdentity("the session cookie is malformed or forged")
	var found []session
	for _, ck := range cs {
		var s session
		if c.session.open(ck.Value, &s) != nil {
			continue
		}
		if !c.now().Before(time.Unix(s.Expires, 0)) {
			err = noIdentity("the session has expired")
			continue
		}
		if e := checkName(s.Name); e != nil {
			err = e
			continue
		}
		if e := checkGroups(s.Groups); e != nil {
			err = e
			continue
		}
		found = append(found, s)
	}
	switch len(found) {
	case 0:
		return session{}, err
	case 1:
		return found[0], nil
	}
	return session{}, noIdentity("%d valid session cookies, want one", len(found))
}

// setLogin sets the sign-in cookie for st.
func (c cookies) setLogin(w http.ResponseWriter, st loginState) error {
	v, err := c.login.seal(st)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: c.loginName, Value: v, Path: c.loginPath, MaxAge: int(loginTTL.Seconds()),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
	return nil
}

// readLogin returns the unexpired sign-in state of r's sign-in cookie. Two
// valid ones are none: one may be somebody else's sign-in, planted to sign
// this browser in as them.
func (c cookies) readLogin(r *http.Request) (loginState, bool) {
	var found []loginState
	for _, ck := range r.CookiesNamed(c.loginName) {
		var st loginState
		if c.login.open(ck.Value, &st) == nil && c.now().Before(time.Unix(st.Expires, 0)) {
			found = append(found, st)
		}
	}
	if len(found) != 1 {
		return loginState{}, false
	}
	return found[0], true
}

// clearLogin removes the sign-in cookie: a state is used once.
func (c cookies) clearLogin(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: c.loginName, Value: "", Path: c.loginPath, MaxAge: -1,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}
