package config

import (
	"strings"
	"testing"
)

// TestLoad_ShortKeysAndSecrets: bearer keys and signing secrets shorter
// than MinKeyBytes, or a key with whitespace, are refused at load, after
// ${NAME} expansion and environment overrides, with an error that names
// the key and never the value.
func TestLoad_ShortKeysAndSecrets(t *testing.T) {
	const (
		short   = "sh0rt-v4lue"                         // 11 bytes
		sixteen = "sixteen-bytes-ok"                    // exactly MinKeyBytes
		spaced  = "approver key with spaces 0123456789" // long, but not one bearer token
	)
	tests := []struct {
		name string
		yaml string // appended to minimalYAML, whose last section is approvals
		env  []string
		want string // the whole error; "" when accepted
	}{
		{
			"agent key from the environment", "identity:\n  api_keys: [{key: \"${AGENT_KEY}\", subject: agent-42}]\n",
			[]string{"AGENT_KEY=" + short},
			"identity.api_keys[0].key: is shorter than 16 bytes (generate one with: openssl rand -hex 32)",
		},
		{
			"agent key of 16 bytes", "identity:\n  api_keys: [{key: \"${AGENT_KEY}\", subject: agent-42}]\n",
			[]string{"AGENT_KEY=" + sixteen},
			"",
		},
		{
			// The file's value is long; the expansion is what counts.
			"agent key text around a short variable", "identity:\n  api_keys: [{key: \"k-${AGENT_KEY}\", subject: agent-42}]\n",
			[]string{"AGENT_KEY=x"},
			"identity.api_keys[0].key: is shorter than 16 bytes (generate one with: openssl rand -hex 32)",
		},
		{
			"approver key", "  approvers: [{name: alice, key: \"${ALICE_KEY}\"}]\n",
			[]string{"ALICE_KEY=" + short},
			"approvals.approvers[0].key: is shorter than 16 bytes (generate one with: openssl rand -hex 32)",
		},
		{
			"approver key of 16 bytes", "  approvers: [{name: alice, key: \"${ALICE_KEY}\"}]\n",
			[]string{"ALICE_KEY=" + sixteen},
			"",
		},
		{
			"approver key with a trailing newline", "  approvers: [{name: alice, key: \"${ALICE_KEY}\"}]\n",
			[]string{"ALICE_KEY=" + testAliceKey + "\n"},
			"approvals.approvers[0].key: contains whitespace or control characters (strip them; a trailing newline from a file?)",
		},
		{
			"approver key with spaces", "  approvers: [{name: alice, key: \"" + spaced + "\"}]\n", nil,
			"approvals.approvers[0].key: contains whitespace or control characters (strip them; a trailing newline from a file?)",
		},
		{
			"slack signing secret", "  slack: {signing_secret: \"${SLACK_SECRET}\", users: {U1: alice}}\n",
			[]string{"SLACK_SECRET=" + short},
			"approvals.slack.signing_secret: is shorter than 16 bytes (copy the Signing Secret from the Slack app's Basic Information page: 32 hexadecimal characters)",
		},
		{
			"slack signing secret from TOOLGATE_", "  slack: {users: {U1: alice}}\n",
			[]string{"TOOLGATE_APPROVALS_SLACK_SIGNING_SECRET=" + short},
			"approvals.slack.signing_secret: is shorter than 16 bytes (copy the Signing Secret from the Slack app's Basic Information page: 32 hexadecimal characters)",
		},
		{
			"slack signing secret with a trailing newline", "  slack: {signing_secret: \"${SLACK_SECRET}\", users: {U1: alice}}\n",
			[]string{"SLACK_SECRET=" + testSlackSecret + "\n"},
			"approvals.slack.signing_secret: contains whitespace or control characters (strip them; a trailing newline from a file?)",
		},
		{
			"notify secret", "  notify: [{url: https://hooks.example.com/t, secret: \"${WEBHOOK_SECRET}\"}]\n",
			[]string{"WEBHOOK_SECRET=" + short},
			"approvals.notify[0].secret: is shorter than 16 bytes (generate one with: openssl rand -base64 32; the receiver verifies with the same secret)",
		},
		{
			"notify whsec_ secret of 12 bytes", "  notify: [{url: https://hooks.example.com/t, secret: whsec_MDEyMzQ1Njc4OWFi}]\n", nil,
			"approvals.notify[0].secret: holds a key shorter than 16 bytes after whsec_ (generate one with: echo whsec_$(openssl rand -base64 32); the receiver verifies with the same secret)",
		},
		{
			"notify whsec_ secret of 16 bytes", "  notify: [{url: https://hooks.example.com/t, secret: whsec_MDEyMzQ1Njc4OWFiY2RlZg==}]\n", nil, "",
		},
		{
			"notify whsec_ secret not base64", "  notify: [{url: https://hooks.example.com/t, secret: whsec_not*base64*at*all}]\n", nil,
			"approvals.notify[0].secret: the part after whsec_ is not valid base64 (write whsec_ and the base64 of the key, or the key itself; the receiver verifies with the same secret)",
		},
		{
			"hook secret", "hooks: [{name: freeze, url: http://127.0.0.1:7000/hook, secret: \"${HOOK_SECRET}\"}]\n",
			[]string{"HOOK_SECRET=" + short},
			"hooks[0].secret: is shorter than 16 bytes (generate one with: openssl rand -base64 32; the hook's receiver verifies with the same secret)",
		},
		{
			"hook without a secret", "hooks: [{name: freeze, url: http://127.0.0.1:7000/hook}]\n", nil, "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := Source{File: writeConfig(t, minimalYAML+tt.yaml), Environ: withEnv(tt.env...)}
			if tt.want == "" {
				mustLoad(t, src)
				return
			}
			err := loadErr(t, src)
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
			for _, secret := range []string{short, spaced, testAliceKey, testSlackSecret, "MDEyMzQ1Njc4OWFi"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows a secret: %v", err)
				}
			}
		})
	}
}

// TestAgentKeyHoldsNoOtherSecret: an agent's API key that is also one of
// toolgate's own secrets is refused, at that secret's key: each of them
// approves calls or speaks as toolgate, and an agent holding its key would
// hold that too.
func TestAgentKeyHoldsNoOtherSecret(t *testing.T) {
	const k = "shared-0123456789abcdefghijklmnopqrstuvwxyz" // long enough for every secret
	agent := "identity:\n  api_keys:\n    - {key: \"" + k + "\", subject: agent-1}\n"
	base := "upstreams: [{name: notes, url: \"http://127.0.0.1:9001\"}]\npolicy: {dir: /srv/policy}\n"
	approvals := func(extra string) string {
		return base + "approvals:\n  secret: ${SECRET}\n" + extra + agent
	}
	cases := []struct{ key, yaml string }{
		{"approvals.secret", base + "approvals:\n  secret: \"" + k + "\"\n" + agent},
		{"approvals.previous_secrets[0]", approvals("  previous_secrets: [\"" + k + "\"]\n")},
		{"approvals.identity.secret", approvals("  identity: {type: trusted_header, user_header: X-User, secret: \"" + k + "\"}\n")},
		{"approvals.identity.cookie_secret", "public_url: https://approvals.example.com\n" + approvals("  identity: {type: oidc, issuer: \"https://idp.example.com\", client_id: toolgate, client_secret: \"client-secret-0123456789abcdef\", cookie_secret: \""+k+"\", allowed_groups: [sre]}\n")},
		{"approvals.identity.client_secret", "public_url: https://approvals.example.com\n" + approvals("  identity: {type: oidc, issuer: \"https://idp.example.com\", client_id: toolgate, client_secret: \""+k+"\", cookie_secret: \"cookie-secret-0123456789abcdefghijklmnop\", allowed_groups: [sre]}\n")},
		{"approvals.slack.signing_secret", approvals("  slack: {signing_secret: \"" + k + "\"}\n")},
		{"approvals.notify[0].secret", approvals("  notify: [{url: \"https://hooks.example.com/t\", secret: \"" + k + "\"}]\n")},
		{"hooks[0].secret", "hooks: [{name: h, url: \"https://hooks.example.com/h\", secret: \"" + k + "\"}]\n" + approvals("")},
		{"log.decisions.service.token", "log: {decisions: {service: {url: \"https://logs.example.com\", token: \"" + k + "\"}}}\n" + approvals("")},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			_, err := Load(Source{File: writeConfig(t, tc.yaml), Environ: []string{"SECRET=" + testApprovalsSecret}})
			want := tc.key + ": is the same secret as identity.api_keys[0].key"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load: %v\nwant an error with %q", err, want)
			}
			if err != nil && strings.Contains(err.Error(), k) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}
