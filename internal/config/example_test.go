package config_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/config"
)

func ExampleLoad() {
	dir, err := os.MkdirTemp("", "toolgate")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "toolgate.yaml")
	err = os.WriteFile(path, []byte(`
upstreams:
  - name: notes
    url: http://127.0.0.1:9001
identity:
  anonymous: true
policy:
  dir: ./policy
pending:
  redis_ur: redis://127.0.0.1:6379/0
approvals:
  secret: ${TOOLGATE_APPROVALS_SECRET}
`), 0o600)
	if err != nil {
		panic(err)
	}

	_, err = config.Load(config.Source{File: path, Environ: []string{"TOOLGATE_LOG_LEVL=debug"}})
	fmt.Println(err)
	// Output:
	// approvals.secret: environment variable TOOLGATE_APPROVALS_SECRET is not set (set TOOLGATE_APPROVALS_SECRET, or write ${TOOLGATE_APPROVALS_SECRET:-fallback} in the file)
	// pending.redis_ur: unknown key (did you mean pending.redis_url?)
	// TOOLGATE_LOG_LEVL: environment variable matches no configuration key (did you mean TOOLGATE_LOG_LEVEL?)
}
