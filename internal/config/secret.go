package config

import "log/slog"

// redacted is what a set Secret prints as.
const redacted = "[redacted]"

// Reveal returns the secret itself. Call it only where the value is used
// (comparing a bearer key, keying an HMAC, dialling Redis), never to log or
// print it.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]" when s is set and "" when it is empty, so that
// a missing secret is still visible as missing.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return "config.Secret(" + `"` + s.String() + `"` + ")" }

// LogValue implements slog.LogValuer with the String form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText implements encoding.TextMarshaler with the String form; it is
// also what encoding/json uses.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML implements yaml.Marshaler with the String form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }
