// Package logurl writes configured URLs for logs, error messages and
// configuration dumps. A URL's user information and query often hold a
// credential (user:pass@, a token as the user, ?token=, ?code=); its
// scheme, host and path say which service it is, and are kept. It knows
// nothing of where the URLs come from.
package logurl

import (
	"errors"
	"net/url"
	"strings"
)

// Redacted stands in for user information and a query.
const Redacted = "REDACTED"

// URL returns u with its user information, if any, as REDACTED@, its query
// as ?REDACTED and no fragment. Go's own (*url.URL).Redacted keeps the
// query, and a user without a password: a token given as the user name.
func URL(u *url.URL) string {
	v := *u
	if v.User != nil {
		v.User = url.User(Redacted)
	}
	if v.RawQuery != "" || v.ForceQuery {
		v.RawQuery, v.ForceQuery = Redacted, false
	}
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}

// String is URL of s; a string that is no URL is hidden whole, as it may
// be anything, a secret included.
func String(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "[" + Redacted + "]"
	}
	return URL(u)
}

// Scrub returns text with u's query and user information replaced, as URL
// writes them, wherever they appear: for messages that others wrote with u
// in them (net/http's errors, which show the password as ***, OPA's
// REST client, a JWKS client), and with a path appended to u.
func Scrub(text string, u *url.URL) string {
	if r := scrubber(u); r != nil {
		return r.Replace(text)
	}
	return text
}

// scrubber replaces u's query and user information, in every spelling
// that writers of URLs use; nil when u has neither.
func scrubber(u *url.URL) *strings.Replacer {
	var pairs []string
	if u.RawQuery != "" {
		pairs = append(pairs, "?"+u.RawQuery, "?"+Redacted)
	}
	if u.User != nil {
		name := u.User.Username()
		pairs = append(pairs, u.User.String()+"@", Redacted+"@")
		if _, ok := u.User.Password(); ok {
			pairs = append(pairs,
				name+":***@", Redacted+"@", // net/http's errors
				url.UserPassword(name, "xxxxx").String()+"@", Redacted+"@") // (*url.URL).Redacted
		}
	}
	if pairs == nil {
		return nil
	}
	return strings.NewReplacer(pairs...)
}

// Error returns err with its text scrubbed of u (Scrub); errors.Is and
// errors.As still see err.
func Error(err error, u *url.URL) error {
	if err == nil {
		return nil
	}
	msg := Scrub(err.Error(), u)
	if msg == err.Error() {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// WithoutURL drops the *url.Error wrapper net/http puts around a request's
// error, whose text repeats the whole URL and with it any credential in
// its query or path (a webhook's token, a hook's ?token=): for callers
// that log what went wrong and name the URL's host themselves, or not at
// all.
func WithoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
