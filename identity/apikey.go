package identity

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// APIKey is a static bearer key and the subject it authenticates.
// Its String, GoString and LogValue redact Key, so printing or logging a
// config never leaks it.
type APIKey struct {
	Key     string
	Subject string
	Groups  []string
}

const redacted = "[REDACTED]"

// String redacts Key.
func (k APIKey) String() string {
	return fmt.Sprintf("{Key:%s Subject:%s Groups:%v}", redacted, k.Subject, k.Groups)
}

// GoString redacts Key (for %#v).
func (k APIKey) GoString() string {
	return fmt.Sprintf("identity.APIKey{Key:%q, Subject:%q, Groups:%#v}", redacted, k.Subject, k.Groups)
}

// LogValue redacts Key.
func (k APIKey) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("key", redacted),
		slog.String("subject", k.Subject),
		slog.Any("groups", k.Groups),
	)
}

// apiKey is what is kept of a configured key: its digest, never the key.
type apiKey struct {
	digest  [sha256.Size]byte
	subject string
	groups  []string
}

// apiKeys finds the key a token equals, in O(1) and without a timing side
// channel on the secret: the map is keyed by the SHA-256 of each key, so a
// lookup compares digests of the presented token, never key bytes, and there
// is no scan over the keys that would stop at the one that matched. Learning
// how many leading digest bytes matched tells an attacker nothing about a
// key they cannot invert SHA-256 for.
type apiKeys map[[sha256.Size]byte]apiKey

func (m apiKeys) lookup(token string) (apiKey, bool) {
	d := sha256.Sum256([]byte(token))
	k, ok := m[d]
	// The map hit already implies equal digests; the constant-time compare
	// keeps that true even if the lookup structure ever changes to one that
	// matches on a prefix or a shorter hash.
	if !ok || subtle.ConstantTimeCompare(k.digest[:], d[:]) != 1 {
		return apiKey{}, false
	}
	return k, true
}

// newAPIKeys validates the configured keys and indexes them by digest. It
// returns one *ConfigError per problem.
func newAPIKeys(cfg []APIKey) (apiKeys, []error) {
	m := make(apiKeys, len(cfg))
	first := make(map[[sha256.Size]byte]int, len(cfg))
	var errs []error
	for i, k := range cfg {
		field := fmt.Sprintf("identity.api_keys[%d]", i)
		switch {
		case k.Key == "":
			errs = append(errs, &ConfigError{Key: field + ".key", Msg: "empty", Fix: "set the bearer key, e.g. key: ${AGENT_KEY}"})
		case strings.IndexFunc(k.Key, isNotTokenChar) >= 0:
			// Such a key could never arrive as one bearer token.
			errs = append(errs, &ConfigError{Key: field + ".key", Msg: "contains whitespace or control characters", Fix: "strip them; a trailing newline from a file?"})
		}
		switch strings.TrimSpace(k.Subject) {
		case "":
			errs = append(errs, &ConfigError{Key: field + ".subject", Msg: "empty", Fix: "say who holds this key, e.g. subject: agent-42"})
		case AnonymousID:
			errs = append(errs, &ConfigError{Key: field + ".subject", Msg: fmt.Sprintf("%q is reserved for callers without credentials", AnonymousID), Fix: "pick another subject"})
		}
		for j, g := range k.Groups {
			if strings.TrimSpace(g) == "" {
				errs = append(errs, &ConfigError{Key: fmt.Sprintf("%s.groups[%d]", field, j), Msg: "empty", Fix: "remove the empty entry"})
			}
		}
		if k.Key == "" {
			continue
		}
		d := sha256.Sum256([]byte(k.Key))
		if j, dup := first[d]; dup {
			// Two subjects for one key would make the caller ambiguous.
			errs = append(errs, &ConfigError{Key: field + ".key", Msg: fmt.Sprintf("same key as identity.api_keys[%d]", j), Fix: "give every identity its own key"})
			continue
		}
		first[d] = i
		m[d] = apiKey{digest: d, subject: k.Subject, groups: slices.Clone(k.Groups)}
	}
	return m, errs
}

func isNotTokenChar(r rune) bool { return r <= ' ' || r == 0x7f }
