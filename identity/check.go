package identity

import (
	"errors"
	"fmt"
	"net/url"
)

// ConfigError is one problem with one key of a Config. Key is the key as
// toolgate's configuration file names it ("identity.jwt.issuer",
// "identity.api_keys[1].key"); Msg says what is wrong and Fix what to do.
// Neither ever holds a key or a token.
type ConfigError struct {
	Key, Msg, Fix string
}

// Error returns "<key>: <msg> (<fix>)".
func (e *ConfigError) Error() string {
	if e.Fix == "" {
		return e.Key + ": " + e.Msg
	}
	return e.Key + ": " + e.Msg + " (" + e.Fix + ")"
}

// Check reports every problem with c that needs neither the file system
// nor the network, each a *ConfigError, joined; nil when there is none. New
// refuses whatever Check refuses, and then reads the JWKS file or fetches
// the JWKS URL, which may fail too.
func (c Config) Check() error {
	_, errs := newAPIKeys(c.APIKeys)
	for i, o := range c.BrowserOrigins {
		if _, ok := CanonicalOrigin(o); !ok {
			errs = append(errs, &ConfigError{
				Key: fmt.Sprintf("identity.browser_origins[%d]", i), Msg: fmt.Sprintf("%q is not an origin", o),
				Fix: "write scheme://host[:port], without a path, e.g. http://localhost:6274",
			})
		}
	}
	if c.JWT != nil {
		errs = append(errs, c.JWT.check()...)
	}
	return errors.Join(errs...)
}

// check is Check for the JWT part.
func (j *JWT) check() []error {
	var errs []error
	bad := func(key, msg, fix string) {
		errs = append(errs, &ConfigError{Key: "identity.jwt." + key, Msg: msg, Fix: fix})
	}
	switch {
	case j.JWKSFile == "" && j.JWKSURL == "":
		bad("jwks_file", "one of jwks_file or jwks_url is required", "set jwks_file or jwks_url")
	case j.JWKSFile != "" && j.JWKSURL != "":
		bad("jwks_url", "set either jwks_file or jwks_url, not both", "keep one of them")
	case j.JWKSURL != "":
		// The URL is never quoted: it may carry credentials. Keys fetched
		// in clear text could be swapped by anyone on the path.
		if u, err := url.Parse(j.JWKSURL); err != nil || u.Scheme != "https" || u.Host == "" {
			bad("jwks_url", "must be an https:// URL", "write it like https://idp.example.com/.well-known/jwks.json")
		}
	}
	if j.Issuer == "" {
		bad("issuer", "required", "set the iss value the tokens must carry")
	}
	if len(j.Audience) == 0 {
		bad("audience", "required", "list at least one aud value the tokens must carry")
	}
	for i, a := range j.Audience {
		if a == "" {
			bad(fmt.Sprintf("audience[%d]", i), "empty", "remove the empty entry")
		}
	}
	switch {
	case j.Leeway < 0:
		bad("leeway", "negative", "write a duration such as 30s")
	case j.Leeway > MaxLeeway:
		bad("leeway", fmt.Sprintf("%v is more than %v", j.Leeway, MaxLeeway),
			"a leeway covers clock skew between the issuer and toolgate: a few seconds, e.g. 30s")
	}
	return errs
}
