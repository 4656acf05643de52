package identity

import "errors"

// ErrUnauthenticated is wrapped by every error that [Authenticator.Authenticate]
// returns: the request carried no acceptable credential. Callers map it to
// 401 with errors.Is; the error's text is a short reason that is safe to log
// and never contains the credential.
var ErrUnauthenticated = errors.New("identity: unauthenticated")

// authError is an authentication failure with a fixed, credential-free
// reason. It is a string type so every reason can be a constant: no globals
// to mutate and no allocation on the (attacker-driven) failure path.
type authError string

func (e authError) Error() string { return string(e) }

// Is makes every authError match ErrUnauthenticated.
func (e authError) Is(target error) bool { return target == ErrUnauthenticated }

// Reasons for a missing or malformed Authorization header, or an API key.
const (
	errNoCredentials      authError = "identity: no credentials"
	errManyAuthorizations authError = "identity: more than one Authorization header"
	errNotBearer          authError = "identity: authorization scheme is not Bearer"
	errEmptyBearer        authError = "identity: bearer token: empty"
	errMalformedBearer    authError = "identity: bearer token: malformed"
	errBearerTooLong      authError = "identity: bearer token: too long"
	errUnknownAPIKey      authError = "identity: bearer token: unknown API key"
)

// Reasons for a rejected JWT.
const (
	errJWTMalformed       authError = "identity: jwt: malformed token"
	errJWTRejected        authError = "identity: jwt: token rejected"
	errJWTSignature       authError = "identity: jwt: invalid signature"
	errJWTNoKeyID         authError = "identity: jwt: token has no key ID"
	errJWTUnknownKey      authError = "identity: jwt: unknown signing key"
	errJWTAlgorithm       authError = "identity: jwt: algorithm not allowed"
	errJWTKeyMismatch     authError = "identity: jwt: algorithm does not match the key"
	errJWTKeysUnavailable authError = "identity: jwt: signing keys unavailable"
	errJWTExpired         authError = "identity: jwt: token expired"
	errJWTNotYetValid     authError = "identity: jwt: token not yet valid"
	errJWTIssuedInFuture  authError = "identity: jwt: token issued in the future"
	errJWTMissingExp      authError = "identity: jwt: missing exp claim"
	errJWTIssuer          authError = "identity: jwt: wrong issuer"
	errJWTAudience        authError = "identity: jwt: wrong audience"
	errJWTClaims          authError = "identity: jwt: invalid claims"
	errJWTClaimType       authError = "identity: jwt: registered claim of the wrong type"
	errJWTSubject         authError = "identity: jwt: missing subject claim"
	errJWTBadSubject      authError = "identity: jwt: subject claim holds control characters, is blank, or is reserved"
	errJWTGroups          authError = "identity: jwt: groups claim is not a list of strings"
)
