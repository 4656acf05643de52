package policy

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps the import graph a DAG: policy knows nothing of HTTP
// routing, parked calls or Redis.
func TestDeps(t *testing.T) {
	testkit.CheckDeps(t, ".",
		"github.com/toolgate/toolgate/proxy/...", "github.com/toolgate/toolgate/pending/...",
		"github.com/toolgate/toolgate/internal/config/...", "github.com/toolgate/toolgate/identity/...",
		"github.com/go-chi/chi/v5/...", "github.com/redis/go-redis/v9/...",
	)
}
