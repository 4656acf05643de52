package config

import (
	"net/url"

	"github.com/toolgate/toolgate/identity"
)

// Options is the identity package's configuration for id, without a
// Logger: the one conversion both Validate and the start use, so what is
// checked is what is built.
//
// proxyPublicURL is the proxy as agents reach it (proxy_public_url): its
// host is a name by which callers without credentials may reach toolgate.
func (id *Identity) Options(proxyPublicURL string) identity.Config {
	ic := identity.Config{Anonymous: id.Anonymous, BrowserOrigins: id.BrowserOrigins}
	if u, err := url.Parse(proxyPublicURL); err == nil && u.Hostname() != "" {
		ic.Hosts = []string{u.Hostname()}
	}
	for _, k := range id.APIKeys {
		ic.APIKeys = append(ic.APIKeys, identity.APIKey{Key: k.Key.Reveal(), Subject: k.Subject, Groups: k.Groups})
	}
	if j := id.JWT; j != nil {
		ic.JWT = &identity.JWT{
			JWKSFile: j.JWKSFile, JWKSURL: j.JWKSURL, Issuer: j.Issuer, Audience: j.Audience,
			SubjectClaim: j.SubjectClaim, SubjectPrefix: j.SubjectPrefix, GroupsClaim: j.GroupsClaim, Leeway: j.Leeway.Std(),
		}
	}
	return ic
}
