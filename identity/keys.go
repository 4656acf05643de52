package identity

import (
	"context"
	"errors"
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// keyProvider hands jws.Verify the one key a token may be verified with,
// and the one algorithm: the token's "alg", accepted only when it is the
// key's algorithm. It replaces jws.WithKeySet so that the rules below are
// toolgate's, stated in one place, and so that each refusal has a reason:
//
//   - "alg" must be one of HS256/384/512, RS256/384/512, PS256/384/512,
//     ES256/384/512, EdDSA or Ed25519; "none" never is.
//   - the key is the one whose "kid" the token names; a token without
//     "kid" is accepted only when the set holds exactly one key.
//   - a key with an "alg" member accepts exactly that algorithm. A key
//     without one accepts the algorithms of its type: RSA → RS*/PS*,
//     EC → the ES* of its curve, oct → HS*, OKP Ed25519 → EdDSA/Ed25519.
//     So a token cannot get an RSA public key used as an HMAC secret.
//   - a key marked "use" other than "sig" is never used.
type keyProvider struct {
	// set returns the current key set; nil when none is available yet.
	set func() jwk.Set
	// symmetric is false for remote key sets: a JWKS served over HTTP is
	// public, so an oct key in it would let anyone mint tokens.
	symmetric bool
}

var _ jws.KeyProvider = keyProvider{}

func (p keyProvider) FetchKeys(_ context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
	hdr := sig.ProtectedHeaders()
	if hdr == nil {
		return errJWTMalformed
	}
	alg, ok := hdr.Algorithm()
	if !ok || hashSize(alg.String()) == 0 {
		return errJWTAlgorithm
	}
	set := p.set()
	if set == nil {
		return errJWTKeysUnavailable
	}
	var key jwk.Key
	if kid, ok := hdr.KeyID(); ok {
		if key, ok = set.LookupKeyID(kid); !ok {
			return errJWTUnknownKey
		}
	} else {
		if set.Len() != 1 {
			return errJWTNoKeyID
		}
		key, _ = set.Key(0)
	}
	if err := keyAccepts(key, alg.String(), p.symmetric); err != nil {
		return errJWTKeyMismatch
	}
	sink.Key(alg, key)
	return nil
}

// hashSize returns the digest size in bytes of a signature algorithm that
// toolgate accepts, and 0 for any other (including "none").
func hashSize(alg string) int {
	switch alg {
	case "HS256", "RS256", "PS256", "ES256":
		return 32
	case "HS384", "RS384", "PS384", "ES384":
		return 48
	case "HS512", "RS512", "PS512", "ES512", "EdDSA", "Ed25519":
		return 64
	}
	return 0
}

type curver interface {
	Crv() (jwa.EllipticCurveAlgorithm, bool)
}

// keyAccepts reports (as an error saying why not) whether key may verify a
// signature made with alg. It is used both when a key set is loaded, for
// a key's own "alg", and for each token.
func keyAccepts(key jwk.Key, alg string, symmetric bool) error {
	if uk, ok := key.(jwk.UnsupportedKey); ok {
		return fmt.Errorf("unsupported key: %w", uk.Reason())
	}
	if use, ok := key.KeyUsage(); ok && use != "" && use != jwk.ForSignature.String() {
		return fmt.Errorf("use is %q, not %q", use, jwk.ForSignature.String())
	}
	if want, ok := key.Algorithm(); ok && want.String() != alg {
		return fmt.Errorf("key is for %s", want)
	}
	switch kty := key.KeyType().String(); kty {
	case "RSA":
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return nil
		}
	case "EC":
		// RFC 7518 §3.4 binds each ES* to one curve.
		crv := curveOf(key)
		if crv == "P-256" && alg == "ES256" || crv == "P-384" && alg == "ES384" || crv == "P-521" && alg == "ES512" {
			return nil
		}
		return fmt.Errorf("EC key on curve %q cannot be used with %q", crv, alg)
	case "OKP":
		crv := curveOf(key)
		if crv == "Ed25519" && (alg == "EdDSA" || alg == "Ed25519") {
			return nil
		}
		return fmt.Errorf("OKP key on curve %q cannot be used with %q", crv, alg)
	case "oct":
		if !symmetric {
			return errors.New("symmetric keys are not accepted from a JWKS URL")
		}
		if alg != "HS256" && alg != "HS384" && alg != "HS512" {
			break
		}
		// RFC 7518 §3.2: the key must be at least as long as the hash.
		if sk, ok := key.(jwk.SymmetricKey); ok {
			if b, _ := sk.Octets(); len(b) >= hashSize(alg) {
				return nil
			}
		}
		return fmt.Errorf("oct key shorter than %d bytes cannot be used with %s", hashSize(alg), alg)
	default:
		return fmt.Errorf("key type %q is not supported", kty)
	}
	return fmt.Errorf("%s key cannot be used with %q", key.KeyType(), alg)
}

func curveOf(key jwk.Key) string {
	if c, ok := key.(curver); ok {
		if crv, ok := c.Crv(); ok {
			return crv.String()
		}
	}
	return ""
}

// checkKeySet refuses a key set with a key that could never verify a token,
// or whose keys could be picked ambiguously.
func checkKeySet(set jwk.Set, symmetric bool) error {
	if set.Len() == 0 {
		return errors.New("no keys")
	}
	seen := make(map[string]int, set.Len())
	var errs []error
	for i := range set.Len() {
		key, _ := set.Key(i)
		kid, hasKid := key.KeyID()
		switch {
		case !hasKid && set.Len() > 1:
			// Only the sole key of a set can be chosen without a kid.
			errs = append(errs, fmt.Errorf("keys[%d]: no kid in a set of %d keys", i, set.Len()))
		case hasKid:
			if j, dup := seen[kid]; dup {
				errs = append(errs, fmt.Errorf("keys[%d]: kid %q also used by keys[%d]", i, kid, j))
			}
			seen[kid] = i
		}
		if err := keyUsable(key, symmetric); err != nil {
			errs = append(errs, fmt.Errorf("keys[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// keyUsable reports whether key can verify anything: with its own "alg"
// when it has one, else with the usual algorithm of its type.
func keyUsable(key jwk.Key, symmetric bool) error {
	if alg, ok := key.Algorithm(); ok {
		return keyAccepts(key, alg.String(), symmetric)
	}
	var alg string
	switch key.KeyType().String() {
	case "RSA":
		alg = "RS256"
	case "EC":
		switch curveOf(key) {
		case "P-384":
			alg = "ES384"
		case "P-521":
			alg = "ES512"
		default: // P-256, or a curve keyAccepts will name in its error
			alg = "ES256"
		}
	case "OKP":
		alg = "EdDSA"
	case "oct":
		alg = "HS256"
	}
	return keyAccepts(key, alg, symmetric)
}
