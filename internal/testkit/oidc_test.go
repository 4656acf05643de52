package testkit

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// authorize asks p for a code as a client would and returns it.
func authorize(t *testing.T, p *OIDCProvider, redirectURI, verifier string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id": {p.ClientID}, "response_type": {"code"}, "redirect_uri": {redirectURI}, "state": {"st"},
		"nonce": {"n"}, "scope": {"openid email"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	c := p.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Get(p.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != http.StatusFound || loc.Query().Get("state") != "st" || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %d to %s", res.StatusCode, loc)
	}
	return loc.Query().Get("code")
}

func exchange(t *testing.T, p *OIDCProvider, form url.Values, basic bool) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(p.ClientSecret))
	}
	res, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("token answer %s: %v", b, err)
	}
	return res.StatusCode, m
}

func TestOIDCProviderToken(t *testing.T) {
	p := NewOIDCProvider(t, "client", "secret")
	const ru = "http://127.0.0.1:1/auth/callback"
	const verifier = "verifier-0123456789-0123456789-0123456789-0123"
	form := func(code string, kv ...string) url.Values {
		f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {ru}, "code_verifier": {verifier}}
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	tests := []struct {
		name  string
		form  func(code string) url.Values
		basic bool
		want  string // the error code; "" for success
	}{
		{"basic auth", func(c string) url.Values { return form(c) }, true, ""},
		{"form credentials", func(c string) url.Values { return form(c, "client_id", "client", "client_secret", "secret") }, false, ""},
		{"wrong verifier", func(c string) url.Values { return form(c, "code_verifier", verifier+"x") }, true, "invalid_grant"},
		{"no verifier", func(c string) url.Values { f := form(c); f.Del("code_verifier"); return f }, true, "invalid_grant"},
		{"wrong redirect_uri", func(c string) url.Values { return form(c, "redirect_uri", "http://127.0.0.1:2/cb") }, true, "invalid_grant"},
		{"unknown code", func(string) url.Values { return form("nope") }, true, "invalid_grant"},
		{"wrong secret", func(c string) url.Values { return form(c, "client_id", "client", "client_secret", "wrong") }, false, "invalid_client"},
		{"no credentials", func(c string) url.Values { return form(c) }, false, "invalid_client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code := authorize(t, p, ru, verifier)
			status, body := exchange(t, p, tt.form(code), tt.basic)
			if tt.want != "" {
				if status < 400 || body["error"] != tt.want {
					t.Errorf("got %d %v, want error %s", status, body, tt.want)
				}
				return
			}
			if status != http.StatusOK || body["id_token"] == "" {
				t.Fatalf("got %d %v", status, body)
			}
			// A code is good once.
			if status, body := exchange(t, p, tt.form(code), tt.basic); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
				t.Errorf("second exchange: %d %v", status, body)
			}
		})
	}
}

func TestOIDCProviderRefusesPlainPKCE(t *testing.T) {
	p := NewOIDCProvider(t, "client", "secret")
	c := p.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	q := url.Values{
		"client_id": {"client"}, "response_type": {"code"}, "redirect_uri": {"http://127.0.0.1:1/cb"}, "state": {"s"},
		"code_challenge": {"abc"}, "code_challenge_method": {"plain"},
	}
	res, err := c.Get(p.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, _ := url.Parse(res.Header.Get("Location"))
	if loc.Query().Get("error") != "invalid_request" || loc.Query().Get("code") != "" {
		t.Errorf("plain PKCE: sent back to %s", loc)
	}
}

func TestOIDCProviderEndSession(t *testing.T) {
	p := NewOIDCProvider(t, "client", "secret")
	const ru = "http://127.0.0.1:1/auth/callback"
	const back = "http://127.0.0.1:1/auth/signed-out"
	const verifier = "verifier-0123456789-0123456789-0123456789-0123"
	endpoint := func() any {
		res, err := p.Client().Get(p.URL + "/.well-known/openid-configuration")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var doc map[string]any
		if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return doc["end_session_endpoint"]
	}
	if e := endpoint(); e != nil {
		t.Errorf("end_session_endpoint %v advertised by default", e)
	}
	p.SetEndSession(p.URL+"/logout", back)
	if e := endpoint(); e != p.URL+"/logout" {
		t.Errorf("end_session_endpoint %v", e)
	}
	_, tok := exchange(t, p, url.Values{
		"grant_type": {"authorization_code"}, "code": {authorize(t, p, ru, verifier)}, "redirect_uri": {ru}, "code_verifier": {verifier},
	}, true)
	hint, _ := tok["id_token"].(string)
	other := NewOIDCProvider(t, "client", "secret")
	_, otherTok := exchange(t, other, url.Values{
		"grant_type": {"authorization_code"}, "code": {authorize(t, other, ru, verifier)}, "redirect_uri": {ru}, "code_verifier": {verifier},
	}, true)
	c := p.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tt := range []struct {
		name   string
		q      url.Values
		status int
	}{
		{"client_id", url.Values{"client_id": {"client"}, "post_logout_redirect_uri": {back}}, http.StatusFound},
		{"id_token_hint", url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {back}, "state": {"s"}}, http.StatusFound},
		{"both", url.Values{"client_id": {"client"}, "id_token_hint": {hint}, "post_logout_redirect_uri": {back}}, http.StatusFound},
		{"no redirect", url.Values{"client_id": {"client"}}, http.StatusOK},
		{"unregistered redirect", url.Values{"client_id": {"client"}, "post_logout_redirect_uri": {back + "x"}}, http.StatusBadRequest},
		{"no client", url.Values{"post_logout_redirect_uri": {back}}, http.StatusBadRequest},
		{"another client", url.Values{"client_id": {"other"}, "id_token_hint": {hint}, "post_logout_redirect_uri": {back}}, http.StatusBadRequest},
		{"another provider's token", url.Values{"id_token_hint": {otherTok["id_token"].(string)}, "post_logout_redirect_uri": {back}}, http.StatusBadRequest},
	} {
		res, err := c.Get(p.URL + "/logout?" + tt.q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.status {
			t.Errorf("%s: %d, want %d", tt.name, res.StatusCode, tt.status)
		}
		if loc := res.Header.Get("Location"); tt.status == http.StatusFound && loc != back && loc != back+"?state="+tt.q.Get("state") {
			t.Errorf("%s: to %q", tt.name, loc)
		}
	}
	if n := len(p.Logouts()); n != 8 {
		t.Errorf("Logouts holds %d requests", n)
	}
}
