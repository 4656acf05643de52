// Package webhooksig signs requests the Standard Webhooks way
// (https://www.standardwebhooks.com): HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<body>", sent as "v1,<base64>" in
// webhook-signature. Notifications and PreToolUse hooks sign with it, so a
// receiver verifies both alike.
package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// SecretPrefix marks a secret given as base64 key bytes ("whsec_...").
const SecretPrefix = "whsec_"

// ParseSecret turns a configured secret into key bytes: "whsec_" + base64,
// or the raw bytes; nil for no secret. Its errors never contain the secret.
func ParseSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("secret: the part after whsec_ is not valid base64")
	}
	if len(key) == 0 {
		return nil, errors.New("secret: whsec_ with an empty key")
	}
	return key, nil
}

// MAC is the signature's HMAC-SHA256.
func MAC(key []byte, id, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns the webhook-signature header value of one request.
func Sign(key []byte, id, timestamp string, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(MAC(key, id, timestamp, body))
}
