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
