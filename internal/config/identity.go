package config

import "github.com/toolgate/toolgate/identity"

// Options is the identity package's configuration for id, without a
// Logger: the one conversion both Validate and the start use, so what is
// checked is what is built.
func (id *Identity) Options() identity.Config {
	ic := identity.Config{Anonymous: id.Anonymous, BrowserOrigins: id.BrowserOrigins}
	for _, k := range id.APIKeys {
		ic.APIKeys = append(ic.APIKeys, identity.APIKey{Key: k.Key.Reveal(), Subject: k.Subject, Groups: k.Groups})
	}
	if j := id.JWT; j != nil {
		ic.JWT = &identity.JWT{
			JWKSFile: j.JWKSFile, JWKSURL: j.JWKSURL, Issuer: j.Issuer, Audience: j.Audience,
			SubjectClaim: j.SubjectClaim, GroupsClaim: j.GroupsClaim, Leeway: j.Leeway.Std(),
		}
	}
	return ic
}
