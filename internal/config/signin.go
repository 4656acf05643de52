package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/toolgate/toolgate/approvals/signin"
)

// Options is the signin package's configuration for approvals.identity,
// given the public URL: the one conversion both Validate and the start use,
// so what is checked is what is built. The caller may set HTTPClient, Now
// and Logger before handing it to signin.New.
func (a *ApprovalsIdentity) Options(publicURL string) signin.Config {
	return signin.Config{
		Type: a.Type,
		Header: signin.HeaderConfig{
			UserHeader: a.UserHeader, GroupsHeader: a.GroupsHeader,
			SecretHeader: a.SecretHeader, Secret: a.Secret.Reveal(), TrustedSources: a.TrustedSources,
			PublicURL: publicURL,
		},
		OIDC: signin.OIDCConfig{
			Issuer: a.Issuer, ClientID: a.ClientID, ClientSecret: a.ClientSecret.Reveal(),
			PublicURL: publicURL, RedirectURL: a.RedirectURL,
			UserClaim: a.UserClaim, GroupsClaim: a.GroupsClaim, Scopes: a.Scopes,
			CookieSecret: a.CookieSecret.Reveal(), SessionTTL: a.SessionTTL.Std(), AllowedGroups: a.AllowedGroups,
			KeepProviderSession: a.ProviderLogout != nil && !*a.ProviderLogout,
		},
	}
}

// Warnings are the settings of c that are sound only in some deployments,
// each naming its key: serve logs them, config validate prints them.
func (c *Config) Warnings() []string {
	var out []string
	if a := c.Approvals.Identity; a != nil && a.Type == signin.TypeTrustedHeader {
		for _, w := range a.Options(c.PublicURL).Header.Warnings() {
			out = append(out, "approvals.identity."+w)
		}
	}
	return out
}

// keysOf returns the keys of a that belong to type typ and are set, in
// declaration order.
func (a *ApprovalsIdentity) keysOf(typ string) []string {
	var keys []string
	add := func(key string, set bool) {
		if set {
			keys = append(keys, key)
		}
	}
	switch typ {
	case signin.TypeTrustedHeader:
		add("user_header", a.UserHeader != "")
		add("groups_header", a.GroupsHeader != "")
		add("secret_header", a.SecretHeader != "")
		add("secret", a.Secret != "")
		add("trusted_sources", a.TrustedSources != nil)
	case signin.TypeOIDC:
		add("issuer", a.Issuer != "")
		add("client_id", a.ClientID != "")
		add("client_secret", a.ClientSecret != "")
		add("redirect_url", a.RedirectURL != "")
		add("groups_claim", a.GroupsClaim != "")
		add("user_claim", a.UserClaim != "")
		add("scopes", a.Scopes != nil)
		add("cookie_secret", a.CookieSecret != "")
		add("session_ttl", a.SessionTTL != 0)
		add("allowed_groups", a.AllowedGroups != nil)
		add("provider_logout", a.ProviderLogout != nil)
	}
	return keys
}

// applyDefaults fills the defaults of a's type only, so that the keys of
// the other type stay unset.
func (a *ApprovalsIdentity) applyDefaults() {
	switch a.Type {
	case signin.TypeTrustedHeader:
		if a.Secret != "" {
			setString(&a.SecretHeader, signin.DefaultSecretHeader)
		}
	case signin.TypeOIDC:
		setString(&a.UserClaim, signin.DefaultUserClaim)
		setString(&a.GroupsClaim, signin.DefaultGroupsClaim)
		if a.Scopes == nil {
			a.Scopes = append([]string{}, signin.DefaultScopes...)
		}
		setDuration(&a.SessionTTL, signin.DefaultSessionTTL)
		if a.ProviderLogout == nil {
			a.ProviderLogout = new(true)
		}
	}
}

func (v *validator) approvalsIdentity(a *ApprovalsIdentity, publicURL string) {
	const at = "approvals.identity."
	var other string
	switch a.Type {
	case signin.TypeTrustedHeader:
		other = signin.TypeOIDC
	case signin.TypeOIDC:
		other = signin.TypeTrustedHeader
	case "":
		v.add(at+"type", "is not set", "set type: trusted_header (behind an authenticating proxy) or type: oidc (toolgate signs approvers in)")
		return
	default:
		v.add(at+"type", fmt.Sprintf("%q is not allowed", a.Type), "use trusted_header or oidc")
		return
	}
	for _, key := range a.keysOf(other) {
		v.add(at+key, fmt.Sprintf("is a key of type %s, but type is %s", other, a.Type), "remove it, or set type: "+other)
	}
	// The rest is the signin package's to judge: what it refuses at start
	// is refused here, in its words.
	for _, err := range unjoin(a.Options(publicURL).Check()) {
		if ce, ok := err.(*signin.ConfigError); ok {
			v.add(ce.Key, ce.Msg, ce.Fix)
			continue
		}
		v.add("approvals.identity", err.Error(), "")
	}
}

// notComposed refuses an approver's name not in Unicode normal form C: the
// same name composed (as identity providers and Slack send names, and as
// sign-in requires them) compares as another person, whom a quorum would
// count beside this one.
const notComposed = "is not in Unicode normal form C (composed): the same name signed in would count as a second approver"

func composeFix(name string) string {
	return fmt.Sprintf("write it composed: %q", norm.NFC.String(name))
}

func (v *validator) slack(s *Slack) {
	const key, from = "approvals.slack.signing_secret", "copy the Signing Secret from the Slack app's Basic Information page"
	switch sec := s.SigningSecret.Reveal(); {
	case sec == "":
		v.add(key, "is not set", from+", e.g. signing_secret: ${SLACK_SIGNING_SECRET}")
	case strings.IndexFunc(sec, notTokenChar) >= 0:
		v.add(key, "contains whitespace or control characters", "strip them; a trailing newline from a file?")
	case len(sec) < MinKeyBytes:
		v.add(key, fmt.Sprintf("is shorter than %d bytes", MinKeyBytes), from+": 32 hexadecimal characters")
	}
	for _, id := range slices.Sorted(maps.Keys(s.Users)) {
		name := s.Users[id]
		at := "approvals.slack.users." + id
		if strings.TrimSpace(id) == "" {
			at = "approvals.slack.users"
			v.add(at, "holds an empty Slack user ID", "write the user's Slack member ID, such as U012ABC, as the key")
		}
		switch {
		case strings.TrimSpace(name) == "":
			v.add(at, "maps a Slack user to an empty approver name", "write the approver's identity, such as alice@example.com")
		case !norm.NFC.IsNormalString(name):
			v.add(at, notComposed, composeFix(name))
		}
	}
}
