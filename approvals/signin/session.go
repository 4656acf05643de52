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
// cookie lives only between /auth/login and /auth/callback.
const (
	SessionCookie = "toolgate_session"
	loginCookie   = "toolgate_signin"
)

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
	loginPath      string // path of the sign-in cookie: the /auth/ routes
	now            func() time.Time
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
		Name: SessionCookie, Value: v, Path: "/",
		Expires: time.Unix(s.Expires, 0), MaxAge: int(time.Unix(s.Expires, 0).Sub(c.now().Truncate(time.Second)).Seconds()),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
	return nil
}

var errTooLarge = errors.New("session cookie too large")

// clearSession removes the session cookie.
func (c cookies) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// readSession returns the approver of r's session cookie, or an error
// wrapping ErrNoIdentity: no cookie, a forged or malformed one, an expired
// one. Of several cookies of that name (a sibling domain may set one), the
// first that opens counts.
func (c cookies) readSession(r *http.Request) (Approver, error) {
	cs := r.CookiesNamed(SessionCookie)
	if len(cs) == 0 {
		return Approver{}, noIdentity("no session cookie")
	}
	err := noIdentity("the session cookie is malformed or forged")
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
		return Approver{Name: s.Name, Groups: s.Groups, Via: "oidc"}, nil
	}
	return Approver{}, err
}

// setLogin sets the sign-in cookie for st.
func (c cookies) setLogin(w http.ResponseWriter, st loginState) error {
	v, err := c.login.seal(st)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: v, Path: c.loginPath, MaxAge: int(loginTTL.Seconds()),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
	return nil
}

// readLogin returns the unexpired sign-in state of r's sign-in cookie.
func (c cookies) readLogin(r *http.Request) (loginState, bool) {
	for _, ck := range r.CookiesNamed(loginCookie) {
		var st loginState
		if c.login.open(ck.Value, &st) == nil && c.now().Before(time.Unix(st.Expires, 0)) {
			return st, true
		}
	}
	return loginState{}, false
}

// clearLogin removes the sign-in cookie: a state is used once.
func (c cookies) clearLogin(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: "", Path: c.loginPath, MaxAge: -1,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}
