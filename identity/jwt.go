package identity

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/toolgate/toolgate/internal/strictjson"
)

// JWT configures verified bearer JWTs. Exactly one of JWKSFile and JWKSURL
// names the keys.
type JWT struct {
	// JWKSFile is the path of a JWKS (or single JWK) JSON file with RSA, EC
	// (P-256/384/521), OKP (Ed25519) or oct keys. It is read once, by New.
	JWKSFile string
	// JWKSURL is the https URL of a JWKS. New fetches it and fails if it
	// cannot; it is then refreshed in the background (as its Cache-Control
	// says, between 5 minutes and 24 hours) and at most once a minute when
	// a token names an unknown kid, so key rotation needs no restart. A
	// refresh that fails keeps the previous keys. oct keys are refused
	// here: a JWKS endpoint is public.
	JWKSURL string
	// HTTPClient fetches JWKSURL. Nil means a client with a 10s timeout
	// that follows only https redirects.
	HTTPClient *http.Client
	// Issuer must equal the token's "iss". Required.
	Issuer string
	// Audience lists accepted audiences; the token's "aud" must contain at
	// least one. Required.
	Audience []string
	// SubjectClaim names the claim that becomes Subject.ID; default "sub".
	// It must be a non-empty string.
	SubjectClaim string
	// SubjectPrefix is prepended to that claim in Subject.ID (not in the
	// principal, which names the issuer apart already): "jwt:" keeps a
	// token's "alice" apart from an API key's subject "alice" in policies,
	// grants and the self-approval check.
	SubjectPrefix string
	// GroupsClaim names the claim that becomes Subject.Groups: an array of
	// strings or a space-separated string. Default "groups"; absent means
	// no groups.
	GroupsClaim string
	// Leeway is the clock skew allowed for exp, nbf and iat; zero means the
	// default, 30s.
	Leeway time.Duration
}

const (
	defaultSubjectClaim = "sub"
	defaultGroupsClaim  = "groups"
	defaultLeeway       = 30 * time.Second
	// MaxLeeway bounds Leeway: it covers clock skew between the issuer
	// and toolgate, and a larger one (a bare 86400 read as seconds) would
	// quietly take expired tokens for good ones.
	MaxLeeway = 5 * time.Minute
)

// jwtVerifier verifies JWTs. Its fields are set once, by newJWTVerifier.
type jwtVerifier struct {
	verifyOpts   []jws.VerifyOption
	validateOpts []jwt.ValidateOption
	subjectClaim string
	prefix       string // SubjectPrefix
	groupsClaim  string
	issuer       string      // the configured issuer, which every accepted token's iss equals
	remote       *remoteKeys // nil for a JWKS file
}

// newJWTVerifier loads the keys of cfg, which Check found sound.
func newJWTVerifier(cfg JWT, logger *slog.Logger) (*jwtVerifier, error) {
	v := &jwtVerifier{
		subjectClaim: cmp.Or(cfg.SubjectClaim, defaultSubjectClaim),
		prefix:       cfg.SubjectPrefix,
		groupsClaim:  cmp.Or(cfg.GroupsClaim, defaultGroupsClaim),
		issuer:       cfg.Issuer,
	}
	var provider keyProvider
	if cfg.JWKSFile != "" {
		set, err := readKeySet(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("identity.jwt.jwks_file: %w", err)
		}
		provider = keyProvider{set: func() jwk.Set { return set }, symmetric: true}
	} else {
		r, err := newRemoteKeys(cfg.JWKSURL, cfg.HTTPClient, logger)
		if err != nil {
			return nil, fmt.Errorf("identity.jwt.jwks_url: %w", err)
		}
		v.remote = r
		provider = keyProvider{set: r.current}
	}
	leeway := cmp.Or(cfg.Leeway, defaultLeeway)
	audience := slices.Clone(cfg.Audience)
	v.verifyOpts = []jws.VerifyOption{
		jws.WithKeyProvider(provider),
		// Belt and braces: the provider already only offers the header's
		// algorithm, and only for a key that accepts it.
		jws.WithAlgorithmMatch(true),
		// RFC 7515 §4.1.11: a "crit" extension toolgate does not know
		// must fail; jws.Verify accepts any by default.
		jws.WithCritValidation(true),
	}
	v.validateOpts = []jwt.ValidateOption{
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithValidator(jwt.ValidatorFunc(func(_ context.Context, t jwt.Token) error {
			aud, _ := t.Audience()
			for _, a := range aud {
				if slices.Contains(audience, a) {
					return nil
				}
			}
			return errJWTAudience
		})),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithAcceptableSkew(leeway),
	}
	return v, nil
}

// readKeySet reads and checks a JWKS file.
func readKeySet(path string) (jwk.Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	if err := checkKeySet(set, true); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return set, nil
}

func (v *jwtVerifier) close() error {
	if v.remote == nil {
		return nil
	}
	return v.remote.close()
}

// verify verifies a compact JWS token and returns its subject.
func (v *jwtVerifier) verify(ctx context.Context, token string) (Subject, error) {
	payload, err := jws.Verify([]byte(token), v.verifyOpts...)
	if err != nil && v.remote != nil && errors.Is(err, errJWTUnknownKey) && v.remote.refresh(ctx) {
		// The issuer may have rotated its keys since the last fetch.
		payload, err = jws.Verify([]byte(token), v.verifyOpts...)
	}
	if err != nil {
		return Subject{}, verifyFailure(err)
	}

	// The payload is signed; now it must be a claim set that holds. It is
	// decoded strictly first: with a duplicated name, jwx and the policy
	// would each keep one of the values, and nothing says they would keep
	// the same one; a registered claim of another JSON type than RFC 7519
	// gives it is refused rather than read leniently (jwx takes "exp" as a
	// numeric string, and "sub" or "jti" as null).
	claims, err := decodeClaims(payload)
	if err != nil {
		return Subject{}, err
	}
	if err := checkRegisteredClaims(claims); err != nil {
		return Subject{}, err
	}
	tok := jwt.New()
	if err := json.Unmarshal(payload, tok); err != nil {
		return Subject{}, errJWTClaims
	}
	if err := jwt.Validate(tok, v.validateOpts...); err != nil {
		return Subject{}, validateFailure(err)
	}
	sub, _ := claims[v.subjectClaim].(string)
	if sub == "" {
		return Subject{}, errJWTSubject
	}
	// A subject toolgate could not send on (X-Toolgate-Subject) or that
	// would read as another caller: control characters, text that is not
	// UTF-8, only spaces, or the anonymous caller's ID (which API keys may
	// not take either).
	if !utf8.ValidString(sub) || strings.IndexFunc(sub, unicode.IsControl) >= 0 || strings.TrimSpace(sub) == "" || v.prefix+sub == AnonymousID {
		return Subject{}, errJWTBadSubject
	}
	groups, err := groupsOf(claims[v.groupsClaim])
	if err != nil {
		return Subject{}, err
	}
	return Subject{ID: v.prefix + sub, Principal: jwtPrincipal(v.issuer, sub), Groups: groups, Claims: claims, Authenticated: true}, nil
}

// verifyFailure turns a jws.Verify error into a short reason.
func verifyFailure(err error) error {
	var reason authError
	switch {
	case errors.As(err, &reason): // from keyProvider
		return reason
	case errors.Is(err, jws.ParseError()):
		return errJWTMalformed
	case errors.Is(err, jws.VerificationError()):
		return errJWTSignature
	}
	return errJWTRejected
}

// validateFailure turns a jwt.Validate error into a short reason.
func validateFailure(err error) error {
	var reason authError
	switch {
	case errors.As(err, &reason): // from the audience validator
		return reason
	case errors.Is(err, jwt.TokenExpiredError()):
		return errJWTExpired
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return errJWTNotYetValid
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return errJWTIssuedInFuture
	case errors.Is(err, jwt.InvalidIssuerError()):
		return errJWTIssuer
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return errJWTMissingExp // exp is the only claim required
	}
	return errJWTClaims
}

// claimsJSON decodes a JWT payload. Its nesting limit is encoding/json's,
// which decoded claims before, so no token is newly refused for its depth
// alone (a bearer token is at most 16 KiB anyway).
var claimsJSON = strictjson.Options{MaxDepth: 10000}

// decodeClaims decodes a JWT payload as strict JSON (see package strictjson:
// duplicate or case-variant names at any depth, invalid UTF-8 and lone
// surrogate escapes are refused) into an object with numbers as
// json.Number.
func decodeClaims(payload []byte) (map[string]any, error) {
	claims, err := claimsJSON.DecodeObject(payload)
	if err != nil {
		return nil, errJWTClaims
	}
	return claims, nil
}

// checkRegisteredClaims refuses a registered claim (RFC 7519 §4.1) that is
// present, null included, with another JSON type than the RFC gives it: exp,
// nbf and iat numbers; iss, sub and jti strings; aud a string or an array
// of strings.
func checkRegisteredClaims(claims map[string]any) error {
	for _, name := range [...]string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"} {
		v, present := claims[name]
		if !present {
			continue
		}
		var ok bool
		switch name {
		case "exp", "nbf", "iat":
			_, ok = v.(json.Number)
		case "aud":
			ok = isAudience(v)
		default:
			_, ok = v.(string)
		}
		if !ok {
			return errJWTClaimType
		}
	}
	return nil
}

// isAudience reports whether v is a string or an array of strings.
func isAudience(v any) bool {
	switch v := v.(type) {
	case string:
		return true
	case []any:
		for _, a := range v {
			if _, ok := a.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// groupsOf reads a groups claim: absent, an array of strings, or a
// space-separated string (the OAuth "scope" style).
func groupsOf(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		groups := make([]string, 0, len(v))
		for _, g := range v {
			s, ok := g.(string)
			if !ok {
				return nil, errJWTGroups
			}
			groups = append(groups, s)
		}
		return groups, nil
	}
	return nil, errJWTGroups
}
