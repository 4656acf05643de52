// Package signin tells who an approver is on the approvals listener: from
// headers set by an authenticating proxy in front (trusted_header), or by
// logging the approver in itself with OpenID Connect (oidc). It knows
// nothing of parked calls or policies: it answers "who is this" and
// nothing else; who may decide what is the approvals package's business.
package signin

import (
	"errors"
	"net/http"
)

// Approver is a person (or bot) known to the approvals listener.
type Approver struct {
	// Name is the approver's identity as decisions record it
	// (decided_by): an e-mail address, a login, an approver key's name.
	Name string
	// Groups are the approver's groups, as the identity source gives them.
	Groups []string
	// Via says how the approver was known: ViaHeader, ViaOIDC, or the
	// approvals handler's own ("key", "slack").
	Via string
}

// How an identity source knows its approvers (Approver.Via).
const (
	ViaHeader = "header"
	ViaOIDC   = "oidc"
)

// ErrNoIdentity: the request carries no approver identity that can be
// trusted (no session, missing headers, or headers from an untrusted
// sender). A page asks the browser to sign in; the API answers 401.
var ErrNoIdentity = errors.New("signin: no approver identity")

// Authenticator tells who makes a request.
type Authenticator interface {
	// Identify returns the approver making r, or an error wrapping
	// ErrNoIdentity when r carries none that can be trusted.
	Identify(r *http.Request) (Approver, error)
	// Routes returns the handler of the authenticator's own pages under
	// /auth/ (OIDC: login, callback, logout), or nil when it has none.
	Routes() http.Handler
	// LoginURL is where a browser without an identity is sent to get one,
	// coming back to returnTo (a path on this listener) afterwards; ""
	// when the authenticator cannot log anybody in (trusted_header).
	LoginURL(returnTo string) string
	// LogoutURL is where a signed-in approver's page posts to sign out;
	// "" when the authenticator signs nobody in (trusted_header).
	LogoutURL() string
	// LogoutOrigins are the origins ("https://idp.example.com"), beside
	// the listener's own, to which POST LogoutURL may redirect the browser
	// (an identity provider's end-session endpoint). Browsers check the
	// form-action of the page that holds the sign-out form on those
	// redirects too, so the pages must allow them. Nil when none.
	LogoutOrigins() []string
}
