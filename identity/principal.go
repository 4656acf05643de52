package identity

import "strings"

// AnonymousPrincipal is the Principal of a request without credentials when
// anonymous access is enabled.
const AnonymousPrincipal = "anonymous"

// Prefixes of Principal, one per kind of credential.
const (
	keyPrincipalPrefix = "key:"
	jwtPrincipalPrefix = "jwt:"
)

// keyPrincipal is the Principal of an API key configured with subject.
func keyPrincipal(subject string) string {
	return keyPrincipalPrefix + subject
}

// issuerEscaper escapes "#" so that the first "#" of a JWT principal always
// ends the issuer, and "%" so that the escaping can be undone: no two
// issuers escape to the same text.
var issuerEscaper = strings.NewReplacer("%", "%25", "#", "%23")

// PrincipalSubject is the subject a principal's credential names, as it
// named it: an API key's subject, a JWT's subject claim before
// identity.jwt.subject_prefix; "" for the anonymous principal. The
// self-approval check compares approvers with it as well as with
// Subject.ID, so that a prefix never lets the human behind a token
// approve their own agent's calls.
func PrincipalSubject(principal string) string {
	if s, ok := strings.CutPrefix(principal, keyPrincipalPrefix); ok {
		return s
	}
	if rest, ok := strings.CutPrefix(principal, jwtPrincipalPrefix); ok {
		if _, s, ok := strings.Cut(rest, "#"); ok {
			return s
		}
	}
	return ""
}

// jwtPrincipal is the Principal of a JWT of issuer whose subject claim is
// subject.
func jwtPrincipal(issuer, subject string) string {
	return jwtPrincipalPrefix + issuerEscaper.Replace(issuer) + "#" + subject
}
