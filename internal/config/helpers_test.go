package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Test secrets, long enough for approvals.secret, and distinct so that a
// leak of any one is attributable.
const (
	testApprovalsSecret = "approvals-secret-0123456789abcdefghijklmnopqrstuv"
	testAgentKey        = "agent-key-0123456789"
	testAliceKey        = "alice-key-0123456789"
	testWebhookSecret   = "webhook-secret-0123456789"
	testRedisPassword   = "redis-password-0123456789"
)

// writeConfig writes content to toolgate.yaml in a fresh directory and
// returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// minimalYAML is the smallest file that validates, given minimalEnv. It has
// no identity section, so that tests may add one; minimalEnv allows
// anonymous callers instead.
const minimalYAML = `
upstreams:
  - name: notes
    url: http://127.0.0.1:9001
policy:
  dir: /srv/policy
approvals:
  secret: ${SECRET}
`

var minimalEnv = []string{"SECRET=" + testApprovalsSecret, "TOOLGATE_IDENTITY_ANONYMOUS=true"}

// withEnv returns minimalEnv followed by extra.
func withEnv(extra ...string) []string {
	return append(append([]string{}, minimalEnv...), extra...)
}

// fieldErrors returns every *FieldError in err's tree, in order.
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				walk(x)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// errorKeys returns the Key of every *FieldError in err.
func errorKeys(err error) []string {
	var keys []string
	for _, fe := range fieldErrors(err) {
		keys = append(keys, fe.Key)
	}
	return keys
}

// mustLoad loads src and fails the test on error.
func mustLoad(t *testing.T, src Source) *Config {
	t.Helper()
	c, err := Load(src)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// loadErr loads src and fails the test unless it is refused.
func loadErr(t *testing.T, src Source) error {
	t.Helper()
	c, err := Load(src)
	if err == nil {
		t.Fatalf("Load succeeded with %+v, want an error", c)
	}
	if c != nil {
		t.Errorf("Load returned a config along with error %v", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Errorf("Load error %q holds no *FieldError", err)
	}
	return err
}
