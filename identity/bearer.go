package identity

import "strings"

// bearerToken extracts the token of an Authorization header value
// "Bearer <token>" (RFC 6750 §2.1; the scheme is case-insensitive).
func bearerToken(header string) (string, error) {
	scheme, token, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errNotBearer
	}
	token = strings.Trim(token, " \t")
	if token == "" {
		return "", errEmptyBearer
	}
	if len(token) > maxTokenLen {
		return "", errBearerTooLong
	}
	// RFC 6750 b64token: a token with spaces or control characters is not
	// one token, and no configured key can contain them (New refuses).
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c == 0x7f {
			return "", errMalformedBearer
		}
	}
	return token, nil
}

// looksLikeJWS reports whether token has the shape of a JWS in compact
// serialization: three base64url segments separated by dots, with a
// non-empty header. The signature segment may be empty so that an
// "alg":"none" token is rejected as a JWT, with a reason, rather than as an
// unknown API key.
func looksLikeJWS(token string) bool {
	dots := 0
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case c == '.':
			dots++
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return dots == 2 && token[0] != '.'
}
