package identity

import (
	"fmt"
	"log/slog"

	"github.com/toolgate/toolgate/internal/logurl"
)

// String describes c with every API key redacted.
func (c Config) String() string {
	return fmt.Sprintf("{APIKeys:%v JWT:%v Anonymous:%t}", c.APIKeys, c.JWT, c.Anonymous)
}

// GoString is String, so %#v cannot print keys either.
func (c Config) GoString() string { return "identity.Config" + c.String() }

// LogValue describes c with every API key redacted.
func (c Config) LogValue() slog.Value {
	keys := make([]any, len(c.APIKeys))
	for i, k := range c.APIKeys {
		keys[i] = k.LogValue()
	}
	attrs := []slog.Attr{
		slog.Any("api_keys", keys),
		slog.Bool("anonymous", c.Anonymous),
	}
	if c.JWT != nil {
		attrs = append(attrs, slog.Any("jwt", c.JWT.LogValue()))
	}
	return slog.GroupValue(attrs...)
}

// String describes j; the JWKS URL's user information and query are
// redacted.
func (j JWT) String() string {
	return fmt.Sprintf("{JWKSFile:%s JWKSURL:%s Issuer:%s Audience:%v SubjectClaim:%s SubjectPrefix:%s GroupsClaim:%s Leeway:%s}",
		j.JWKSFile, logurl.String(j.JWKSURL), j.Issuer, j.Audience, j.SubjectClaim, j.SubjectPrefix, j.GroupsClaim, j.Leeway)
}

// LogValue describes j; the JWKS URL's user information and query are
// redacted.
func (j JWT) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("jwks_file", j.JWKSFile),
		slog.String("jwks_url", logurl.String(j.JWKSURL)),
		slog.String("issuer", j.Issuer),
		slog.Any("audience", j.Audience),
		slog.String("subject_claim", j.SubjectClaim),
		slog.String("subject_prefix", j.SubjectPrefix),
		slog.String("groups_claim", j.GroupsClaim),
		slog.Duration("leeway", j.Leeway),
	)
}
