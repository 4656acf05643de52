package logurl

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"https://idp.example.com/jwks.json":               "https://idp.example.com/jwks.json",
		"https://idp.example.com/jwks?token=T1&x=2":       "https://idp.example.com/jwks?REDACTED",
		"https://u:P1@logs.example.com/svc":               "https://REDACTED@logs.example.com/svc",
		"https://T2@logs.example.com/svc?":                "https://REDACTED@logs.example.com/svc?REDACTED",
		"https://h.example.com/p#frag":                    "https://h.example.com/p",
		"http://h.example.com:8080/a%2Fb?k=v":             "http://h.example.com:8080/a%2Fb?REDACTED",
		"https://h.example.com/\x7f?token=T3":             "[REDACTED]",
		"https://u:P4@h.example.com/hook?hooktoken=T5#fr": "https://REDACTED@h.example.com/hook?REDACTED",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestError: the messages net/http and fmt write with a URL in them lose
// its query and user information, with a path appended to it too, and
// the error still unwraps.
func TestError(t *testing.T) {
	u, _ := url.Parse("https://ju:PASS1@127.0.0.1:1/jwks?jwkstoken=QS1")
	_, httpErr := http.Get(u.String())
	joined, _ := url.Parse(u.Scheme + "://" + u.User.String() + "@" + u.Host + "/jwks/logs?" + u.RawQuery)
	for _, err := range []error{
		httpErr,
		fmt.Errorf("fetching %s: %w", u.Redacted(), httpErr),
		&url.Error{Op: "Post", URL: joined.String(), Err: errors.New("refused")},
	} {
		got := Error(err, u)
		if msg := got.Error(); strings.Contains(msg, "QS1") || strings.Contains(msg, "PASS1") || strings.Contains(msg, "ju:") ||
			!strings.Contains(msg, "127.0.0.1:1/jwks") || !strings.Contains(msg, "?REDACTED") {
			t.Errorf("Error(%q) = %q", err, msg)
		}
		if !errors.Is(got, err) {
			t.Errorf("Error(%q) does not unwrap to it", err)
		}
	}
	if plain := errors.New("no URL here"); Error(plain, u) != plain {
		t.Error("an error without the URL is not returned as it is")
	}
}

func TestWithoutURL(t *testing.T) {
	inner := errors.New("connection refused")
	err := &url.Error{Op: "Post", URL: "https://hooks.example.com/h?token=s3cret", Err: inner}
	if got := WithoutURL(err); got != inner {
		t.Errorf("WithoutURL = %v, want the wrapped error alone", got)
	}
	if got := WithoutURL(inner); got != inner {
		t.Errorf("WithoutURL(plain) = %v, want it unchanged", got)
	}
}
