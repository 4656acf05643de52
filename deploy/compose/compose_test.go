package compose

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/toolgate/toolgate/internal/config"
)

const (
	composeFile = "../../docker-compose.yml"
	testSecret  = "0123456789abcdefghijklmnopqrstuvwxyzABCD"
)

// load reads a compose file the way `docker compose config` does, with
// compose-go (the loader Docker Compose itself is built on): the Compose
// Specification's JSON schema, which refuses unknown keys, then
// interpolation from env, then the model.
func load(t *testing.T, file string, env ...string) (*types.Project, error) {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithEnv(env),
		cli.WithName("toolgate"),
	)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(t.Context())
}

// TestComposeFileLoads: the compose file is valid Compose, and its shape is
// the one docker-compose.yml's header promises.
func TestComposeFileLoads(t *testing.T) {
	p, err := load(t, composeFile, "TOOLGATE_APPROVALS_SECRET="+testSecret)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	if got, want := p.ServiceNames(), []string{"notes", "redis", "toolgate"}; !slices.Equal(sorted(got), want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	for name, s := range p.Services {
		// Only toolgate is reachable from the host, and only on loopback:
		// nothing reaches the tool server but through the gate.
		if name != "toolgate" && len(s.Ports) > 0 {
			t.Errorf("%s publishes ports %v; only toolgate may", name, s.Ports)
		}
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			t.Errorf("%s has no health check", name)
		}
		// Redis on store, the tool server on backend, toolgate on both
		// (and edge): the tool server cannot reach the store, where a
		// write approves a parked call.
		want := map[string]string{"redis": "store", "notes": "backend"}[name]
		for net := range s.Networks {
			if name != "toolgate" && net != want {
				t.Errorf("%s is on network %s, want %s alone", name, net, want)
			}
		}
	}
	for _, net := range []string{"backend", "store"} {
		if !p.Networks[net].Internal {
			t.Errorf("the %s network is not internal", net)
		}
	}
	gate := p.Services["toolgate"]
	var published []string
	for _, port := range gate.Ports {
		if port.HostIP != "127.0.0.1" {
			t.Errorf("toolgate publishes %s on %q, want 127.0.0.1", port.Published, port.HostIP)
		}
		published = append(published, fmt.Sprintf("%s->%d", port.Published, port.Target))
	}
	if want := []string{"8080->8080", "8081->8081"}; !slices.Equal(sorted(published), want) {
		t.Errorf("toolgate publishes %v, want %v (proxy and approvals, never admin)", published, want)
	}
	for _, name := range []string{"toolgate", "notes"} {
		s := p.Services[name]
		if test := strings.Join(s.HealthCheck.Test, " "); !strings.Contains(test, "toolgate healthcheck") {
			t.Errorf("%s's health check is %q, want `toolgate healthcheck`", name, test)
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) {
			t.Errorf("%s: read_only %v, cap_drop %v; want a read-only root and every capability dropped", name, s.ReadOnly, s.CapDrop)
		}
	}
	if dep, ok := gate.DependsOn["redis"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("toolgate does not wait for a healthy Redis: %+v", gate.DependsOn)
	}
}

// TestComposeNeedsSecret: without the approvals secret, compose refuses to
// start rather than run toolgate with an empty HMAC key.
func TestComposeNeedsSecret(t *testing.T) {
	_, err := load(t, composeFile)
	if err == nil || !strings.Contains(err.Error(), "TOOLGATE_APPROVALS_SECRET") {
		t.Fatalf("loading without TOOLGATE_APPROVALS_SECRET: %v, want an error naming it", err)
	}
}

// TestComposeRefusesMisspeltKey shows the check above is strict: the same
// file with one key misspelt does not load.
func TestComposeRefusesMisspeltKey(t *testing.T) {
	src, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "healthcheck:", "healthchek:", 1)
	if bad == string(src) {
		t.Fatal("no healthcheck key to misspell")
	}
	file := filepath.Join(t.TempDir(), "docker-compose.yml")
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, file, "TOOLGATE_APPROVALS_SECRET="+testSecret); err == nil || !strings.Contains(err.Error(), "healthchek") {
		t.Fatalf("a misspelt key loaded: %v", err)
	}
}

// TestMountedConfigAccepted: toolgate's own loader accepts the file the
// compose file mounts, with the environment the compose file gives the
// container, and the config agrees with the compose file.
func TestMountedConfigAccepted(t *testing.T) {
	p, err := load(t, composeFile, "TOOLGATE_APPROVALS_SECRET="+testSecret)
	if err != nil {
		t.Fatal(err)
	}
	gate := p.Services["toolgate"]
	var environ []string
	for k, v := range gate.Environment {
		if v != nil {
			environ = append(environ, k+"="+*v)
		}
	}
	mounts := map[string]string{}
	for _, v := range gate.Volumes {
		mounts[v.Target] = v.Source
	}
	file, ok := mounts["/etc/toolgate/toolgate.yaml"]
	if !ok {
		t.Fatalf("toolgate.yaml is not mounted: %v", mounts)
	}
	if want, _ := filepath.Abs("toolgate.yaml"); file != want {
		t.Errorf("the compose file mounts %s, want this directory's toolgate.yaml", file)
	}
	cfg, err := config.Load(config.Source{File: file, Environ: environ})
	if err != nil {
		t.Fatalf("toolgate refuses the mounted config: %v", err)
	}
	if _, ok := mounts[cfg.Policy.Dir]; !ok {
		t.Errorf("policy.dir %s is not a mount (mounts: %v)", cfg.Policy.Dir, mounts)
	}
	if cfg.Pending.Store != "redis" || !strings.Contains(cfg.Pending.RedisURL.Reveal(), "//redis:6379") {
		t.Errorf("parked calls go to %s %s, want the compose redis service", cfg.Pending.Store, cfg.Pending.RedisURL)
	}
	if u := cfg.Upstreams[0].URL; u != "http://notes:9001" {
		t.Errorf("upstream %s, want the notes service", u)
	}
	if string(cfg.Approvals.Secret.Reveal()) != testSecret {
		t.Error("the approvals secret does not reach toolgate's config")
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
