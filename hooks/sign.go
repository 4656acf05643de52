package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// Standard Webhooks (https://www.standardwebhooks.com) signs
// "<webhook-id>.<webhook-timestamp>.<body>" with HMAC-SHA256 and sends
// "v1,<base64 signature>" in webhook-signature. The notify package signs
// its deliveries the same way but exports only Verify, so hooks has its own
// few lines; both read secrets alike ("whsec_" + base64, or raw bytes), and
// the tests check these signatures with notify.Verify.

const secretPrefix = "whsec_"

// parseSecret turns a Hook.Secret into key bytes; nil for no secret. Its
// errors never contain the secret.
func parseSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	b64, ok := strings.CutPrefix(secret, secretPrefix)
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

// sign returns the webhook-signature header value for one request.
func sign(key []byte, id, timestamp string, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil))
}
