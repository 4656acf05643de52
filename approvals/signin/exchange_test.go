package signin

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestOIDCExchangeErrorNotEchoed: when the token endpoint refuses the code,
// or fails, with a body of its own (HTML, a long string, an error code and
// description carrying markup), the browser gets a generic page that
// quotes none of it, and the log holds the HTTP status and at most the
// OAuth 2.0 error code, sanitized and cut short, never the body.
func TestOIDCExchangeErrorNotEchoed(t *testing.T) {
	long := strings.Repeat("A", 8<<10)
	const markup = `<script>alert("idp")</script>`
	tests := []struct {
		name, contentType, body string
		status                  int
		wantStatus              int
		wantPage                string
		wantLog                 []string // parts the log line holds
	}{
		{
			"HTML error page", "text/html", "<html><body>" + markup + long + "</body></html>", http.StatusBadRequest,
			http.StatusBadGateway, "The identity provider did not accept the sign-in&#39;s code.",
			[]string{`"status":400`},
		},
		{
			"OAuth error with markup", "application/json",
			`{"error":"invalid_grant` + strings.ReplaceAll(markup, `"`, `\"`) + long + `","error_description":"` + strings.ReplaceAll(markup, `"`, `\"`) + long + `"}`,
			http.StatusBadRequest, http.StatusBadGateway, "The identity provider did not accept the sign-in&#39;s code.",
			[]string{`"status":400`, `"error":"invalid_grant<script>alert(?idp?)</script>` + strings.Repeat("A", 22) + `…"`},
		},
		{
			"OAuth error in a 200", "application/json", `{"error":"invalid_grant","error_description":"` + long + `"}`,
			http.StatusOK, http.StatusBadGateway, "The identity provider did not accept the sign-in&#39;s code.",
			[]string{`"status":200`, `"error":"invalid_grant"`},
		},
		{
			"server error with a body", "text/html", markup + long, http.StatusInternalServerError,
			http.StatusServiceUnavailable, "toolgate cannot reach the identity provider just now.",
			[]string{`"status":500`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			l := newListener(t, func(o *OIDCConfig) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
			c := stepper(t)
			cb := l.toCallback(t, c)
			l.idp.SetTokenAnswer(tt.status, tt.contentType, tt.body)
			res, page := get(t, c, cb.String())
			if res.StatusCode != tt.wantStatus || cookieOf(res, SessionCookie) != nil {
				t.Fatalf("callback: %d, want %d\n%s", res.StatusCode, tt.wantStatus, page)
			}
			if !strings.Contains(page, tt.wantPage) {
				t.Errorf("page lacks %q:\n%s", tt.wantPage, page)
			}
			for _, leak := range []string{"alert", "AAAAAAAA", "invalid_grant"} {
				if strings.Contains(page, leak) {
					t.Errorf("page echoes the provider's answer (%q):\n%s", leak, page)
				}
			}
			line := logs.String()
			for _, want := range tt.wantLog {
				if !strings.Contains(line, want) {
					t.Errorf("log lacks %s:\n%s", want, line)
				}
			}
			if strings.Contains(line, "<html>") || strings.Contains(line, "error_description") ||
				strings.Contains(line, strings.Repeat("A", 100)) {
				t.Errorf("log holds the provider's body:\n%.600s", line)
			}
			if len(line) > 600 {
				t.Errorf("log line of %d bytes, want it bounded:\n%.600s", len(line), line)
			}
		})
	}
}

// TestOIDCProviderErrorNotEchoed: an error the provider sends the browser
// back with is shown only as a short OAuth 2.0 error code, and logged cut
// short: the query is whatever reached the browser.
func TestOIDCProviderErrorNotEchoed(t *testing.T) {
	var logs bytes.Buffer
	l := newListener(t, func(o *OIDCConfig) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	c := stepper(t)
	cb := l.toCallback(t, c)
	q := cb.Query()
	q.Del("code")
	q.Set("error", "access_denied\n<b>"+strings.Repeat("B", 4<<10))
	q.Set("error_description", strings.Repeat("D", 4<<10))
	cb.RawQuery = q.Encode()
	res, page := get(t, c, cb.String())
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("callback: %d\n%s", res.StatusCode, page)
	}
	if !strings.Contains(page, "The identity provider did not sign you in (access_denied?&lt;b&gt;BBB") || strings.Contains(page, strings.Repeat("B", 100)) {
		t.Errorf("page:\n%s", page)
	}
	if line := logs.String(); strings.Contains(line, strings.Repeat("B", 100)) || strings.Contains(line, strings.Repeat("D", 300)) {
		t.Errorf("log holds the whole query:\n%.800s", line)
	}
}

// TestOIDCDiscoveryAnswerBounded: an issuer whose discovery endpoint
// answers an error with an endless body is read no further than
// maxProviderBody, and the log quotes at most maxProviderText bytes of it,
// control characters replaced; the page says only that sign-in is
// unavailable.
func TestOIDCDiscoveryAnswerBounded(t *testing.T) {
	var sent atomic.Int64
	chunk := []byte("<html>\n" + strings.Repeat("X", 64<<10-7))
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		for range 1024 { // 64 MiB
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer idp.Close()
	var logs bytes.Buffer
	a, err := New(Config{Type: TypeOIDC, OIDC: OIDCConfig{
		Issuer: idp.URL, ClientID: "toolgate", ClientSecret: "client-secret-0123", PublicURL: "http://toolgate.test",
		CookieSecret: cookieSecret, AllowedGroups: []string{"dev"}, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	a.Routes().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/login", nil))
	if w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "XXXX") {
		t.Errorf("login with a failing discovery: %d\n%s", w.Code, w.Body.String())
	}
	idp.CloseClientConnections()
	if n := sent.Load(); n > 16<<20 {
		t.Errorf("the provider got %d bytes of its answer read, want about %d", n, 1<<20)
	}
	line := logs.String()
	if len(line) > 600 || !strings.Contains(line, "500 Internal Server Error") || strings.Contains(line, `\n`) {
		t.Errorf("log line of %d bytes:\n%.800s", len(line), line)
	}
}
