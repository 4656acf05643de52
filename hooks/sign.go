package hooks

import "github.com/toolgate/toolgate/internal/webhooksig"

// Hooks sign their requests as notifications do (internal/webhooksig), so
// a receiver verifies both alike; the tests check them with notify.Verify.

func parseSecret(secret string) ([]byte, error) { return webhooksig.ParseSecret(secret) }

func sign(key []byte, id, timestamp string, body []byte) string {
	return webhooksig.Sign(key, id, timestamp, body)
}
