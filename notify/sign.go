package notify

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/webhooksig"
)

// Standard Webhooks (https://www.standardwebhooks.com) signs
// "<webhook-id>.<webhook-timestamp>.<body>" with HMAC-SHA256 and sends
// "v1,<base64 signature>" in webhook-signature; several space-separated
// signatures may be sent while a secret is rotated.

// DefaultTolerance is how far webhook-timestamp may be from the receiver's
// clock when [Verify] is given no tolerance: the specification's 5 minutes.
const DefaultTolerance = 5 * time.Minute

// Errors [Verify] wraps; test with errors.Is.
var (
	ErrMissingHeader = errors.New("notify: missing webhook header")
	ErrTimestamp     = errors.New("notify: webhook timestamp missing, malformed or outside the tolerance")
	ErrSignature     = errors.New("notify: no valid webhook signature")
)

// parseSecret turns a Target.Secret into key bytes.
func parseSecret(secret string) ([]byte, error) { return webhooksig.ParseSecret(secret) }

// sign returns the webhook-signature header value.
func sign(key []byte, id, timestamp string, body []byte) string {
	return webhooksig.Sign(key, id, timestamp, body)
}

// Verify checks a Standard Webhooks signed request, for receivers and
// tests: body must be the raw request body, header the request's headers
// (webhook-id, webhook-timestamp, webhook-signature), and secret the same
// string the sender's [Target] has. It returns nil if any v1 signature
// matches (compared in constant time) and the timestamp is within
// tolerance of now (tolerance ≤ 0 means [DefaultTolerance]); otherwise an
// error wrapping ErrMissingHeader, ErrTimestamp or ErrSignature. An empty
// secret verifies nothing.
func Verify(secret string, header http.Header, body []byte, tolerance time.Duration) error {
	key, err := parseSecret(secret)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if len(key) == 0 {
		return errors.New("notify: empty secret")
	}
	var vals [3]string
	for i, name := range [3]string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		if vals[i] = header.Get(name); vals[i] == "" {
			return fmt.Errorf("%w: %s", ErrMissingHeader, name)
		}
	}
	id, ts, sigs := vals[0], vals[1], vals[2]

	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	// Compared in seconds so a far-off value cannot overflow a Duration.
	now := time.Now().Unix()
	if tol := int64(tolerance / time.Second); secs < now-tol || secs > now+tol {
		return ErrTimestamp
	}

	want := webhooksig.MAC(key, id, ts, body)
	for sig := range strings.FieldsSeq(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignature
}
