package config

import (
	"fmt"
	"strings"
)

// errUnset reports a ${NAME} reference to a variable that is not set and has
// no fallback.
type errUnset struct{ name string }

func (e errUnset) Error() string {
	return "environment variable " + e.name + " is not set"
}

// expand replaces, in one string value of the file:
//
//	${NAME}           the value of the environment variable NAME; an error if it is unset
//	${NAME:-fallback} NAME's value, or fallback when NAME is unset or empty
//	$${               a literal "${"
//
// Any other "$" is kept as is, so "pa$$word" stays "pa$$word". The result
// is never expanded again: an environment value that contains "${" or YAML
// syntax stays plain text. A fallback cannot contain "}". refs receives every
// NAME referenced. Errors never quote the string, which may hold a secret.
func expand(s string, lookup func(string) (string, bool), refs func(string)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf(`"${" at byte %d has no closing "}"`, i)
			}
			ref := s[i+2 : i+2+end]
			name, fallback, hasFallback := strings.Cut(ref, ":-")
			if !validEnvName(name) {
				return "", fmt.Errorf(`"${" at byte %d is not followed by a variable name (letters, digits and _) and "}" or ":-fallback}"`, i)
			}
			refs(name)
			v, ok := lookup(name)
			switch {
			case hasFallback && v == "":
				v = fallback
			case !ok:
				return "", errUnset{name}
			}
			b.WriteString(v)
			i += 2 + end + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

// validEnvName reports whether s is a POSIX-style variable name.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// environMap turns os.Environ-style entries into a map. As with os.Getenv,
// the first entry for a name wins; entries without "=" are ignored.
func environMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, seen := m[k]; !seen {
			m[k] = v
		}
	}
	return m
}
