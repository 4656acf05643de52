package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/approvals/signin"
)

const (
	testProxySecret   = "proxy-secret-0123456789abcdef"
	testCookieSecret  = "cookie-secret-0123456789abcdefghijklmnop"
	testClientSecret  = "client-secret-0123456789"
	testSlackSecret   = "slack-signing-secret-0123456789"
	trustedHeaderYAML = minimalYAML + `  approvers:
    - name: alice@example.com
      groups: [sre]
    - name: ci-bot
      key: ${ALICE_KEY}
      groups: [bots, sre]
  identity:
    type: trusted_header
    user_header: X-Auth-Request-Email
    groups_header: X-Auth-Request-Groups
    secret: ${PROXY_SECRET}
    trusted_sources: [10.0.0.0/8]
  slack:
    signing_secret: ${SLACK_SECRET}
    users: {U012ABC: alice@example.com, W999: "${BOB}"}
`
	oidcYAML = minimalYAML + `  identity:
    type: oidc
    issuer: https://accounts.example.com
    client_id: toolgate
    client_secret: ${CLIENT_SECRET}
    cookie_secret: ${COOKIE_SECRET}
    allowed_groups: [approvers]
public_url: https://toolgate.example.com
`
)

var signinEnv = withEnv("ALICE_KEY="+testAliceKey, "PROXY_SECRET="+testProxySecret, "SLACK_SECRET="+testSlackSecret,
	"BOB=bob@example.com", "CLIENT_SECRET="+testClientSecret, "COOKIE_SECRET="+testCookieSecret)

func TestLoad_TrustedHeader(t *testing.T) {
	c := mustLoad(t, Source{File: writeConfig(t, trustedHeaderYAML), Environ: signinEnv})
	want := signin.Config{Type: "trusted_header", Header: signin.HeaderConfig{
		UserHeader: "X-Auth-Request-Email", GroupsHeader: "X-Auth-Request-Groups",
		SecretHeader: "X-Approvals-Proxy-Secret", Secret: testProxySecret, TrustedSources: []string{"10.0.0.0/8"},
		PublicURL: c.PublicURL,
	}, OIDC: signin.OIDCConfig{PublicURL: c.PublicURL}}
	if diff := cmp.Diff(want, c.Approvals.Identity.Options(c.PublicURL)); diff != "" {
		t.Errorf("Options (-want +got):\n%s", diff)
	}
	if _, err := signin.New(c.Approvals.Identity.Options(c.PublicURL)); err != nil {
		t.Errorf("signin.New: %v", err)
	}
	if diff := cmp.Diff(&Slack{SigningSecret: testSlackSecret, Users: map[string]string{"U012ABC": "alice@example.com", "W999": "bob@example.com"}}, c.Approvals.Slack); diff != "" {
		t.Errorf("slack (-want +got):\n%s", diff)
	}
	wantApprovers := []Approver{{Name: "alice@example.com", Groups: []string{"sre"}}, {Name: "ci-bot", Key: testAliceKey, Groups: []string{"bots", "sre"}}}
	if diff := cmp.Diff(wantApprovers, c.Approvals.Approvers); diff != "" {
		t.Errorf("approvers (-want +got):\n%s", diff)
	}
}

func TestLoad_OIDC(t *testing.T) {
	c := mustLoad(t, Source{File: writeConfig(t, oidcYAML), Environ: signinEnv})
	want := signin.Config{Type: "oidc", Header: signin.HeaderConfig{PublicURL: c.PublicURL}, OIDC: signin.OIDCConfig{
		Issuer: "https://accounts.example.com", ClientID: "toolgate", ClientSecret: testClientSecret,
		PublicURL: "https://toolgate.example.com", UserClaim: "email", GroupsClaim: "groups",
		Scopes: []string{"openid", "email", "profile"}, CookieSecret: testCookieSecret,
		SessionTTL: 8 * time.Hour, AllowedGroups: []string{"approvers"},
	}}
	if diff := cmp.Diff(want, c.Approvals.Identity.Options(c.PublicURL), cmp.Comparer(func(a, b func() time.Time) bool { return a == nil && b == nil })); diff != "" {
		t.Errorf("Options (-want +got):\n%s", diff)
	}
	if _, err := signin.New(c.Approvals.Identity.Options(c.PublicURL)); err != nil {
		t.Errorf("signin.New: %v", err)
	}
	if c.Approvals.Identity.SecretHeader != "" {
		t.Errorf("a trusted_header default was applied to oidc: %q", c.Approvals.Identity.SecretHeader)
	}

	// The environment sets identity keys and the Slack users as pairs.
	c = mustLoad(t, Source{File: writeConfig(t, oidcYAML), Environ: append(signinEnv,
		"TOOLGATE_APPROVALS_IDENTITY_SESSION_TTL=2h", "TOOLGATE_APPROVALS_SLACK_SIGNING_SECRET="+testSlackSecret,
		"TOOLGATE_APPROVALS_SLACK_USERS=U1=alice@example.com, U2 = bob")})
	if c.Approvals.Identity.SessionTTL.Std() != 2*time.Hour {
		t.Errorf("session_ttl %s", c.Approvals.Identity.SessionTTL)
	}
	if diff := cmp.Diff(map[string]string{"U1": "alice@example.com", "U2": "bob"}, c.Approvals.Slack.Users); diff != "" {
		t.Errorf("slack users from the environment (-want +got):\n%s", diff)
	}
}

// TestLoad_OIDCProviderLogout: provider_logout defaults to true; false,
// from the file or the environment, keeps the provider's session at
// sign-out.
func TestLoad_OIDCProviderLogout(t *testing.T) {
	c := mustLoad(t, Source{File: writeConfig(t, oidcYAML), Environ: signinEnv})
	if p := c.Approvals.Identity.ProviderLogout; p == nil || !*p || c.Approvals.Identity.Options(c.PublicURL).OIDC.KeepProviderSession {
		t.Errorf("default provider_logout %v", p)
	}
	off := strings.Replace(oidcYAML, "allowed_groups: [approvers]", "allowed_groups: [approvers]\n    provider_logout: false", 1)
	for name, src := range map[string]Source{
		"file":        {File: writeConfig(t, off), Environ: signinEnv},
		"environment": {File: writeConfig(t, oidcYAML), Environ: append(append([]string{}, signinEnv...), "TOOLGATE_APPROVALS_IDENTITY_PROVIDER_LOGOUT=false")},
	} {
		c := mustLoad(t, src)
		if !c.Approvals.Identity.Options(c.PublicURL).OIDC.KeepProviderSession {
			t.Errorf("%s: provider_logout: false does not keep the provider's session", name)
		}
	}
}

// TestLoad_OIDCEveryone: ["*"] admits everyone the provider signs in, from
// the file or the environment.
func TestLoad_OIDCEveryone(t *testing.T) {
	everyone := strings.Replace(oidcYAML, "allowed_groups: [approvers]", `allowed_groups: ["*"]`, 1)
	for name, src := range map[string]Source{
		"file":        {File: writeConfig(t, everyone), Environ: signinEnv},
		"environment": {File: writeConfig(t, oidcYAML), Environ: append(append([]string{}, signinEnv...), "TOOLGATE_APPROVALS_IDENTITY_ALLOWED_GROUPS=*")},
	} {
		c := mustLoad(t, src)
		o := c.Approvals.Identity.Options(c.PublicURL)
		if diff := cmp.Diff([]string{signin.AllowEveryone}, o.OIDC.AllowedGroups); diff != "" {
			t.Errorf("%s: allowed_groups (-want +got):\n%s", name, diff)
		}
		if _, err := signin.New(o); err != nil {
			t.Errorf("%s: signin.New: %v", name, err)
		}
	}
}

func TestLoad_SigninErrors(t *testing.T) {
	th := func(body string) string {
		return minimalYAML + "  identity:\n    type: trusted_header\n    user_header: X-User\n" + body
	}
	// oidcGroups is an oidc identity with the given allowed_groups line.
	oidcGroups := func(groups, body string) string {
		return minimalYAML + "  identity:\n    type: oidc\n    issuer: https://idp.example.com\n    client_id: toolgate\n    client_secret: ${CLIENT_SECRET}\n" + groups + body
	}
	oidc := func(body string) string { return oidcGroups("    allowed_groups: [approvers]\n", body) }
	tests := []struct {
		name, yaml string
		env        []string
		keys       []string
		msg        string // a part of the first error's text
	}{
		{
			"no type", minimalYAML + "  identity:\n    user_header: X-User\n    secret: ${PROXY_SECRET}\n", nil,
			[]string{"approvals.identity.type"},
			"trusted_header",
		},
		{
			"unknown type", minimalYAML + "  identity:\n    type: saml\n", nil,
			[]string{"approvals.identity.type"},
			`"saml" is not allowed`,
		},
		{
			"unknown key", th("    secret: ${PROXY_SECRET}\n    user_headr: X\n"), nil,
			[]string{"approvals.identity.user_headr"},
			"user_header",
		},
		{
			"neither secret nor sources", th(""), nil,
			[]string{"approvals.identity.secret"},
			"trusted_sources",
		},
		{
			"bad source", th("    trusted_sources: [10.0.0.0/99]\n"), nil,
			[]string{"approvals.identity.trusted_sources[0]"},
			"CIDR",
		},
		{
			"provider_logout on trusted_header", th("    secret: ${PROXY_SECRET}\n    provider_logout: false\n"), nil,
			[]string{"approvals.identity.provider_logout"},
			"type oidc, but type is trusted_header",
		},
		{
			"oidc keys on trusted_header", th("    secret: ${PROXY_SECRET}\n    issuer: https://idp.example.com\n    cookie_secret: ${COOKIE_SECRET}\n"), nil,
			[]string{"approvals.identity.issuer", "approvals.identity.cookie_secret"},
			"type oidc, but type is trusted_header",
		},
		{
			"trusted_header keys on oidc", oidc("    cookie_secret: ${COOKIE_SECRET}\n    user_header: X-User\n    trusted_sources: [10.0.0.0/8]\n"), nil,
			[]string{"approvals.identity.user_header", "approvals.identity.trusted_sources"},
			"type trusted_header, but type is oidc",
		},
		{
			"no cookie secret", oidc(""), nil,
			[]string{"approvals.identity.cookie_secret"},
			"openssl rand",
		},
		{
			"short cookie secret", oidc("    cookie_secret: ${SHORT}\n"),
			[]string{"SHORT=0123456789"},
			[]string{"approvals.identity.cookie_secret"},
			"shorter than 32 bytes",
		},
		{
			"oidc without client", minimalYAML + "  identity:\n    type: oidc\n    issuer: https://idp.example.com\n    cookie_secret: ${COOKIE_SECRET}\n    allowed_groups: [approvers]\n", nil,
			[]string{"approvals.identity.client_id", "approvals.identity.client_secret"},
			"client ID",
		},
		{
			// Everyone a public provider signs in would be an approver.
			"oidc without allowed_groups", oidcGroups("", "    cookie_secret: ${COOKIE_SECRET}\n"), nil,
			[]string{"approvals.identity.allowed_groups"},
			`["*"]`,
		},
		{
			"oidc allowed_groups empty", oidcGroups("    allowed_groups: []\n", "    cookie_secret: ${COOKIE_SECRET}\n"), nil,
			[]string{"approvals.identity.allowed_groups"},
			"everyone the identity provider signs in",
		},
		{
			"oidc everyone beside groups", oidcGroups("    allowed_groups: [sre, \"*\"]\n", "    cookie_secret: ${COOKIE_SECRET}\n"), nil,
			[]string{"approvals.identity.allowed_groups"},
			`"*" beside groups`,
		},
		{
			"slack without signing secret", minimalYAML + "  slack:\n    users: {U1: alice}\n", nil,
			[]string{"approvals.slack.signing_secret"},
			"Signing Secret",
		},
		{
			"slack user without a name", minimalYAML + "  slack:\n    signing_secret: ${SLACK_SECRET}\n    users: {U1: \"\", U2: bob}\n", nil,
			[]string{"approvals.slack.users.U1"},
			"empty approver name",
		},
		{
			"slack user not composed", minimalYAML + "  slack:\n    signing_secret: ${SLACK_SECRET}\n    users: {U1: \"jose\\u0301\", U2: bob}\n", nil,
			[]string{"approvals.slack.users.U1"},
			"normal form C",
		},
		{
			"slack user not a string", minimalYAML + "  slack:\n    signing_secret: ${SLACK_SECRET}\n    users: {U1: 7}\n", nil,
			[]string{"approvals.slack.users.U1"},
			"expected a string",
		},
		{
			"slack users not a mapping", minimalYAML + "  slack:\n    signing_secret: ${SLACK_SECRET}\n    users: [U1]\n", nil,
			[]string{"approvals.slack.users"},
			"expected a mapping",
		},
		{
			"slack unknown key", minimalYAML + "  slack:\n    signing_secret: ${SLACK_SECRET}\n    user: {U1: a}\n", nil,
			[]string{"approvals.slack.user"},
			"unknown key",
		},
		{
			"approver with neither key nor groups", minimalYAML + "  approvers:\n    - name: alice\n", nil,
			[]string{"approvals.approvers[0].key"},
			"no groups either",
		},
		{
			"approver with an empty group", minimalYAML + "  approvers:\n    - name: alice\n      groups: [sre, \" \"]\n", nil,
			[]string{"approvals.approvers[0].groups[1]"},
			"empty",
		},
		{
			"approver names repeat without keys", minimalYAML + "  approvers:\n    - name: alice\n      groups: [a]\n    - name: alice\n      groups: [b]\n", nil,
			[]string{"approvals.approvers[1].name"},
			"also the name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := loadErr(t, Source{File: writeConfig(t, tt.yaml), Environ: append(append([]string{}, signinEnv...), tt.env...)})
			if diff := cmp.Diff(tt.keys, errorKeys(err)); diff != "" {
				t.Fatalf("error keys (-want +got):\n%s\nerror: %v", diff, err)
			}
			if fe := fieldErrors(err)[0]; !strings.Contains(fe.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", fe.Error(), tt.msg)
			}
			for _, secret := range []string{testProxySecret, testCookieSecret, testClientSecret, testSlackSecret, "0123456789"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows a secret: %v", err)
				}
			}
		})
	}
}

func TestRedacted_Signin(t *testing.T) {
	c := mustLoad(t, Source{File: writeConfig(t, trustedHeaderYAML), Environ: signinEnv})
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{testProxySecret, testSlackSecret, testAliceKey} {
		if strings.Contains(string(out), secret) {
			t.Errorf("Redacted shows a secret:\n%s", out)
		}
	}
	for _, want := range []string{
		"  identity:\n    type: trusted_header\n    user_header: X-Auth-Request-Email\n",
		"    secret_header: X-Approvals-Proxy-Secret\n    secret: '[redacted]'\n    trusted_sources: [10.0.0.0/8]\n",
		"  slack:\n    signing_secret: '[redacted]'\n    users:\n      U012ABC: alice@example.com\n      W999: bob@example.com\n",
		"    - name: alice@example.com\n      key: \"\"\n      groups: [sre]\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Redacted lacks %q:\n%s", want, out)
		}
	}
}

// TestRequesterSignInNeedsIdentity: approvals.requester_sign_in without
// approvals.identity, through which the requester would sign in, is refused.
func TestRequesterSignInNeedsIdentity(t *testing.T) {
	c := validConfig()
	c.Approvals.RequesterSignIn = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "approvals.requester_sign_in: is true but approvals.identity is not set") {
		t.Fatalf("Validate() = %v", err)
	}
}
