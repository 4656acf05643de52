package kubernetes

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/deploy/internal/kubestrict"
	"github.com/toolgate/toolgate/internal/config"
)

// The manifests under test, and what they must agree on.
const (
	nativeFile  = "sidecar-native.yaml"
	classicFile = "sidecar-classic.yaml"

	appDeployment  = "notes"            // the tool server and its gate
	gateContainer  = "toolgate"         // the sidecar
	toolContainer  = "notes"            // the tool server
	configMapName  = "toolgate-config"  // toolgate.yaml
	configKey      = "toolgate.yaml"    // its key
	policyMapName  = "toolgate-policy"  // the policy directory
	secretName     = "toolgate-secrets" // the environment's secrets
	redisName      = "toolgate-redis"   // Deployment and Service
	proxyService   = "notes"            // agents
	approvalsSvc   = "toolgate-approvals"
	shippedPolicy  = "../../rego/example/notes.rego"
	testSecret40   = "0123456789abcdefghijklmnopqrstuvwxyzABCD"
	testAgentKey   = "agent-key-0123456789"
	toolListenHost = "127.0.0.1"
)

// manifest is one YAML file, decoded into the typed Kubernetes objects.
type manifest struct {
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	services    map[string]*corev1.Service
	deployments map[string]*appsv1.Deployment
}

// parse decodes every document of data by its apiVersion and kind. The
// decoding is strict: an unknown or misspelt field (in any letter case), a
// duplicate key, a value of the wrong type, a kind the manifests do not use
// and two objects of one kind and name are errors.
func parse(data []byte) (*manifest, error) {
	m := &manifest{
		configMaps:  map[string]*corev1.ConfigMap{},
		secrets:     map[string]*corev1.Secret{},
		services:    map[string]*corev1.Service{},
		deployments: map[string]*appsv1.Deployment{},
	}
	for i, doc := range kubestrict.SplitDocuments(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			err = kubestrict.DecodeInto[corev1.ConfigMap](doc, m.configMaps)
		case "v1 Secret":
			err = kubestrict.DecodeInto[corev1.Secret](doc, m.secrets)
		case "v1 Service":
			err = kubestrict.DecodeInto[corev1.Service](doc, m.services)
		case "apps/v1 Deployment":
			err = kubestrict.DecodeInto[appsv1.Deployment](doc, m.deployments)
		default:
			err = fmt.Errorf("unsupported apiVersion %q kind %q", tm.APIVersion, tm.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, tm.Kind, err)
		}
	}
	return m, nil
}

func load(t *testing.T, file string) *manifest {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parse(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return m
}

// bothFiles runs f on each manifest.
func bothFiles(t *testing.T, f func(t *testing.T, file string, m *manifest)) {
	for _, file := range []string{nativeFile, classicFile} {
		t.Run(file, func(t *testing.T) { f(t, file, load(t, file)) })
	}
}

// podContainer is a container of a pod template, with where it is declared.
type podContainer struct {
	*corev1.Container
	init bool
}

func containers(spec *corev1.PodSpec) []podContainer {
	var out []podContainer
	for i := range spec.InitContainers {
		out = append(out, podContainer{&spec.InitContainers[i], true})
	}
	for i := range spec.Containers {
		out = append(out, podContainer{&spec.Containers[i], false})
	}
	return out
}

func findContainer(t *testing.T, spec *corev1.PodSpec, name string) podContainer {
	t.Helper()
	var found []podContainer
	for _, c := range containers(spec) {
		if c.Name == name {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one container %q in the pod, found %d", name, len(found))
	}
	return found[0]
}

func appPod(t *testing.T, m *manifest) *corev1.PodSpec {
	t.Helper()
	d := m.deployments[appDeployment]
	if d == nil {
		t.Fatalf("no Deployment %q", appDeployment)
	}
	return &d.Spec.Template.Spec
}

// TestManifestsDecode checks that both files decode strictly and hold the
// objects README.md describes, and nothing else.
func TestManifestsDecode(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		got := map[string][]string{
			"ConfigMap":  slices.Sorted(maps.Keys(m.configMaps)),
			"Secret":     slices.Sorted(maps.Keys(m.secrets)),
			"Service":    slices.Sorted(maps.Keys(m.services)),
			"Deployment": slices.Sorted(maps.Keys(m.deployments)),
		}
		want := map[string][]string{
			"ConfigMap":  {configMapName, policyMapName},
			"Secret":     {secretName},
			"Service":    {proxyService, approvalsSvc, redisName},
			"Deployment": {appDeployment, redisName},
		}
		for k := range want {
			slices.Sort(want[k])
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("objects (-want +got):\n%s", d)
		}
	})
}

// TestStrictDecoding proves that the decoder refuses what the API server
// would refuse or silently drop, starting from the real native manifest.
func TestStrictDecoding(t *testing.T) {
	native, err := os.ReadFile(nativeFile)
	if err != nil {
		t.Fatal(err)
	}
	mustReplace := func(old, new string) []byte {
		t.Helper()
		if !bytes.Contains(native, []byte(old)) {
			t.Fatalf("%s does not contain %q", nativeFile, old)
		}
		return bytes.Replace(native, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name    string
		doc     []byte
		wantErr string // "" means no error
	}{
		{"the manifest as shipped", native, ""},
		{"misspelt field", mustReplace("\n          restartPolicy: Always", "\n          restartPolicyy: Always"), `unknown field "restartPolicyy"`},
		{"field in the wrong case", mustReplace("\n          restartPolicy: Always", "\n          RestartPolicy: Always"), `unknown field "RestartPolicy"`},
		{"misspelt metadata", mustReplace("metadata:\n  name: toolgate-policy", "metdata:\n  name: toolgate-policy"), `unknown field "metdata"`},
		{"field at the wrong level", mustReplace("      enableServiceLinks: false", "      enableServiceLink: false"), `unknown field "enableServiceLink"`},
		{"wrong value type", mustReplace("replicas: 2", "replicas: two"), "replicas"},
		{"duplicate key", mustReplace("  replicas: 2\n", "  replicas: 2\n  replicas: 3\n"), "replicas"},
		{"unsupported kind", []byte("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: x\n"), "unsupported"},
		{"object defined twice", append(slices.Clone(native), []byte("\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: toolgate-secrets\n")...), "defined twice"},
		{"namespace in a manifest", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: prod\n"), "namespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.doc)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("no error, want one containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestNativeSidecar: on >= 1.29 toolgate is an init container with
// restartPolicy Always, gated by a startupProbe on the admin /readyz.
func TestNativeSidecar(t *testing.T) {
	pod := appPod(t, load(t, nativeFile))
	gate := findContainer(t, pod, gateContainer)
	if !gate.init {
		t.Fatalf("toolgate is in containers, want it in initContainers")
	}
	if gate.RestartPolicy == nil || *gate.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("toolgate's restartPolicy is %v, want Always (a native sidecar)", gate.RestartPolicy)
	}
	if len(pod.InitContainers) != 1 {
		t.Errorf("%d init containers, want only toolgate", len(pod.InitContainers))
	}
	if tool := findContainer(t, pod, toolContainer); tool.init {
		t.Errorf("the tool server is an init container")
	}
	checkProbes(t, gate.Container, true)
}

// TestClassicSidecar: on older clusters toolgate is a second container.
func TestClassicSidecar(t *testing.T) {
	pod := appPod(t, load(t, classicFile))
	if len(pod.InitContainers) != 0 {
		t.Fatalf("%d init containers, want none (restartPolicy on init containers needs 1.29)", len(pod.InitContainers))
	}
	gate := findContainer(t, pod, gateContainer)
	if gate.RestartPolicy != nil {
		t.Errorf("toolgate sets restartPolicy %q; a regular container must not", *gate.RestartPolicy)
	}
	findContainer(t, pod, toolContainer)
	checkProbes(t, gate.Container, false)
}

// checkProbes: startup and readiness on /readyz, liveness on /livez, all
// on the admin port 9090.
func checkProbes(t *testing.T, c *corev1.Container, startupRequired bool) {
	t.Helper()
	check := func(kind string, p *corev1.Probe, wantPath string, required bool) {
		t.Helper()
		switch {
		case p == nil && required:
			t.Errorf("toolgate has no %s probe", kind)
		case p == nil:
		case p.HTTPGet == nil:
			t.Errorf("toolgate's %s probe is not httpGet", kind)
		case p.HTTPGet.Path != wantPath || p.HTTPGet.Port != intstr.FromInt32(9090):
			t.Errorf("toolgate's %s probe is %s on port %s, want %s on 9090", kind, p.HTTPGet.Path, p.HTTPGet.Port.String(), wantPath)
		}
	}
	check("startup", c.StartupProbe, "/readyz", startupRequired)
	check("readiness", c.ReadinessProbe, "/readyz", true)
	check("liveness", c.LivenessProbe, "/livez", true)
}

// TestSameExceptSidecarPlacement: the two files differ only in where
// toolgate is declared, so a fix to one cannot be forgotten in the other.
func TestSameExceptSidecarPlacement(t *testing.T) {
	native, classic := load(t, nativeFile), load(t, classicFile)
	for _, d := range []struct {
		name      string
		want, got any
	}{
		{"ConfigMaps", native.configMaps, classic.configMaps},
		{"Secrets", native.secrets, classic.secrets},
		{"Services", native.services, classic.services},
		{"Redis", native.deployments[redisName], classic.deployments[redisName]},
	} {
		if diff := cmp.Diff(d.want, d.got); diff != "" {
			t.Errorf("%s differ (-native +classic):\n%s", d.name, diff)
		}
	}

	// Moving toolgate from initContainers (minus its restartPolicy) to the
	// front of containers turns the native Deployment into the classic one.
	nd := native.deployments[appDeployment].DeepCopy()
	np := &nd.Spec.Template.Spec
	if len(np.InitContainers) != 1 {
		t.Fatalf("%d init containers in %s, want 1", len(np.InitContainers), nativeFile)
	}
	gate := np.InitContainers[0]
	gate.RestartPolicy = nil
	np.InitContainers = nil
	np.Containers = append([]corev1.Container{gate}, np.Containers...)
	// The preStop sleeps need Kubernetes 1.30, as the native file does and
	// the classic one must not (TestPreStop).
	for i := range np.Containers {
		np.Containers[i].Lifecycle = nil
	}
	if diff := cmp.Diff(nd, classic.deployments[appDeployment]); diff != "" {
		t.Errorf("the Deployments differ beyond toolgate's placement (-native +classic):\n%s", diff)
	}
}

// preStopSleep is the seconds the tool pod's containers sleep in preStop.
const preStopSleep = 5

// TestPreStop: in the native file, every container of the tool pod sleeps
// preStopSleep seconds in preStop before it is signalled, so the pod keeps
// serving while Services and ingresses drop it (after SIGTERM toolgate
// answers new calls 503). The tool server sleeps too: all containers'
// preStop hooks start together, and without its own sleep it would stop at
// once and toolgate would forward the calls of those seconds to nothing.
// The grace period must be longer than the sleep plus shutdown_grace
// (TestConfigAccepted). The classic file is for clusters older than 1.30,
// which have no sleep action and would refuse the Deployment, and the
// image has no shell for an exec sleep: it has no preStop.
func TestPreStop(t *testing.T) {
	pod := appPod(t, load(t, nativeFile))
	for _, name := range []string{gateContainer, toolContainer} {
		c := findContainer(t, pod, name)
		if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != preStopSleep {
			t.Errorf("%s: %s's lifecycle is %+v, want a preStop sleep of %d s", nativeFile, name, c.Lifecycle, preStopSleep)
		} else if l.PreStop.Exec != nil || l.PreStop.HTTPGet != nil || l.PreStop.TCPSocket != nil || l.PostStart != nil {
			t.Errorf("%s: %s's lifecycle has more than the sleep: %+v", nativeFile, name, l)
		}
	}
	for _, c := range containers(appPod(t, load(t, classicFile))) {
		if c.Lifecycle != nil {
			t.Errorf("%s: %s has a lifecycle %+v; the clusters this file is for have no sleep action", classicFile, c.Name, c.Lifecycle)
		}
	}

	// The rule TestConfigAccepted applies: a grace period of exactly the
	// sleep plus shutdown_grace is too short.
	m := load(t, nativeFile)
	pod = appPod(t, m)
	drain := loadConfig(t, m, testEnviron()).ShutdownGrace.Std()
	short := int64((preStopSleep*time.Second + drain) / time.Second)
	pod.TerminationGracePeriodSeconds = &short
	if err := graceCovers(pod, drain); err == nil {
		t.Errorf("a grace period of %d s passes with a %d s sleep and shutdown_grace %s", short, preStopSleep, drain)
	}
}

// graceCovers reports an error unless the pod's grace period is longer
// than its longest preStop sleep plus toolgate's shutdown_grace: Kubernetes
// counts the sleep in the grace period, and kills toolgate when it ends.
func graceCovers(pod *corev1.PodSpec, shutdownGrace time.Duration) error {
	grace := 30 * time.Second // the API's default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	var sleep time.Duration
	for _, c := range containers(pod) {
		if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
			sleep = max(sleep, time.Duration(l.PreStop.Sleep.Seconds)*time.Second)
		}
	}
	if grace <= sleep+shutdownGrace {
		return fmt.Errorf("terminationGracePeriodSeconds %s is not longer than the preStop sleep %s plus shutdown_grace %s", grace, sleep, shutdownGrace)
	}
	return nil
}

// TestHardening: every container of every pod runs as non-root on a
// read-only root filesystem with no capabilities, and no mount uses
// subPath (a subPath mount never sees ConfigMap updates).
func TestHardening(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		for _, name := range slices.Sorted(maps.Keys(m.deployments)) {
			pod := &m.deployments[name].Spec.Template.Spec
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("%s: automountServiceAccountToken is not false", name)
			}
			for _, c := range containers(pod) {
				at := name + "/" + c.Name
				sc := c.SecurityContext
				if sc == nil {
					t.Errorf("%s: no securityContext", at)
					continue
				}
				isTrue := func(p *bool) bool { return p != nil && *p }
				if !isTrue(sc.RunAsNonRoot) {
					t.Errorf("%s: runAsNonRoot is not true", at)
				}
				if sc.RunAsUser == nil || *sc.RunAsUser == 0 {
					t.Errorf("%s: runAsUser is not a non-zero uid", at)
				}
				if !isTrue(sc.ReadOnlyRootFilesystem) {
					t.Errorf("%s: readOnlyRootFilesystem is not true", at)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("%s: allowPrivilegeEscalation is not false", at)
				}
				if isTrue(sc.Privileged) {
					t.Errorf("%s: privileged", at)
				}
				if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
					t.Errorf("%s: capabilities do not drop ALL (or add some)", at)
				}
				seccomp := sc.SeccompProfile
				if seccomp == nil && pod.SecurityContext != nil {
					seccomp = pod.SecurityContext.SeccompProfile
				}
				if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: seccompProfile is not RuntimeDefault", at)
				}
				for _, vm := range c.VolumeMounts {
					if vm.SubPath != "" || vm.SubPathExpr != "" {
						t.Errorf("%s: volumeMount %s uses subPath", at, vm.Name)
					}
				}
				for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if _, ok := c.Resources.Requests[res]; !ok {
						t.Errorf("%s: no %s request", at, res)
					}
					if _, ok := c.Resources.Limits[res]; !ok {
						t.Errorf("%s: no %s limit", at, res)
					}
				}
			}
		}
	})
}

// TestToolServerBehindGate: the tool server binds 127.0.0.1 and exposes no
// port, and every Service targets a toolgate port, never the tool's.
func TestToolServerBehindGate(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		pod := appPod(t, m)
		tool := findContainer(t, pod, toolContainer)
		listen := kubestrict.FlagValue(tool.Args, "--listen")
		host, toolPort, err := net.SplitHostPort(listen)
		if err != nil || host != toolListenHost {
			t.Fatalf("tool server args %q: --listen %q does not bind %s", tool.Args, listen, toolListenHost)
		}
		if len(tool.Ports) > 0 {
			t.Errorf("the tool server declares ports %v; it must not be reachable from outside the pod", tool.Ports)
		}

		cfg := loadConfig(t, m, testEnviron())
		if len(cfg.Upstreams) != 1 {
			t.Fatalf("%d upstreams, want 1", len(cfg.Upstreams))
		}
		u, err := url.Parse(cfg.Upstreams[0].URL)
		if err != nil || u.Host != net.JoinHostPort(toolListenHost, toolPort) {
			t.Errorf("upstream URL %q is not the tool server's %s", cfg.Upstreams[0].URL, listen)
		}

		gate := findContainer(t, pod, gateContainer)
		gatePorts := map[string]int32{}
		for _, p := range gate.Ports {
			gatePorts[p.Name] = p.ContainerPort
		}
		wantTargets := map[string]int32{proxyService: 8080, approvalsSvc: 8081}
		for name, want := range wantTargets {
			svc := m.services[name]
			if svc == nil {
				t.Errorf("no Service %q", name)
				continue
			}
			if !kubestrict.Selects(svc.Spec.Selector, m.deployments[appDeployment].Spec.Template.Labels) {
				t.Errorf("Service %s does not select the %s pods", name, appDeployment)
			}
			if len(svc.Spec.Ports) != 1 {
				t.Errorf("Service %s exposes %d ports, want only %d", name, len(svc.Spec.Ports), want)
				continue
			}
			target := svc.Spec.Ports[0].TargetPort
			got := target.IntVal
			if target.Type == intstr.String {
				got = gatePorts[target.StrVal]
			}
			if got != want {
				t.Errorf("Service %s targets %s, want toolgate's %d", name, target.String(), want)
			}
			if strconv.Itoa(int(got)) == toolPort || got == gatePorts["admin"] {
				t.Errorf("Service %s targets %d: the tool server or the admin port", name, got)
			}
		}
		for _, svc := range m.services {
			for _, p := range svc.Spec.Ports {
				if p.TargetPort.String() == toolPort {
					t.Errorf("Service %s targets the tool server's port %s", svc.Name, toolPort)
				}
			}
		}

		// The listeners toolgate.yaml configures are the ports the pod
		// declares, the probes use and the Services target.
		for key, addr := range map[string]string{"proxy": cfg.Listen.Proxy, "approvals": cfg.Listen.Approvals, "admin": cfg.Listen.Admin} {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				t.Errorf("listen.%s %q: %v", key, addr, err)
				continue
			}
			if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
				t.Errorf("listen.%s binds %s; probes and Services reach the pod IP, so bind 0.0.0.0", key, host)
			}
			if port != strconv.Itoa(int(gatePorts[key])) {
				t.Errorf("listen.%s port %s, but the container port %q is %d", key, port, key, gatePorts[key])
			}
		}
	})
}

func testEnviron() []string {
	return []string{"AGENT_KEY=" + testAgentKey, "TOOLGATE_APPROVALS_SECRET=" + testSecret40}
}

// loadConfig runs toolgate's own loader on the ConfigMap's toolgate.yaml.
func loadConfig(t *testing.T, m *manifest, environ []string) *config.Config {
	t.Helper()
	cfg, err := loadConfigErr(t, m, environ)
	if err != nil {
		t.Fatalf("toolgate refuses %s/%s: %v", configMapName, configKey, err)
	}
	return cfg
}

func loadConfigErr(t *testing.T, m *manifest, environ []string) (*config.Config, error) {
	t.Helper()
	cm := m.configMaps[configMapName]
	if cm == nil || cm.Data[configKey] == "" {
		t.Fatalf("no ConfigMap %s with key %s", configMapName, configKey)
	}
	file := filepath.Join(t.TempDir(), configKey)
	if err := os.WriteFile(file, []byte(cm.Data[configKey]), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(config.Source{File: file, Environ: environ})
}

// TestConfigAccepted: toolgate's loader accepts the ConfigMap, and the
// config agrees with the pod: the config file and policy directory are
// where the volumes are mounted, the environment the file reads is what
// the container gets from the Secret, Redis is the Service in the file.
func TestConfigAccepted(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		cfg := loadConfig(t, m, testEnviron())
		pod := appPod(t, m)
		gate := findContainer(t, pod, gateContainer)

		// --config names the key of the config volume.
		cfgPath := kubestrict.FlagValue(gate.Args, "--config")
		if got, want := mountedFile(t, pod, gate.Container, configMapName, configKey), cfgPath; got != want {
			t.Errorf("toolgate reads --config %q, but %s/%s is mounted at %q", want, configMapName, configKey, got)
		}
		// policy.dir is the whole policy ConfigMap, mounted as a directory.
		if got := mountPath(t, pod, gate.Container, policyMapName); got != cfg.Policy.Dir {
			t.Errorf("policy.dir is %q, but %s is mounted at %q", cfg.Policy.Dir, policyMapName, got)
		}
		if !cfg.Policy.Watching() {
			t.Errorf("policy.watch is off: ConfigMap updates would not be picked up")
		}

		// Every ${NAME} of the file comes from the container's environment,
		// and every secretKeyRef names a key of the Secret.
		env := map[string]bool{}
		secret := m.secrets[secretName]
		for _, e := range gate.Env {
			env[e.Name] = true
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				if ref.SecretKeyRef.Name != secretName {
					t.Errorf("env %s reads Secret %q, want %q", e.Name, ref.SecretKeyRef.Name, secretName)
				} else if _, ok := secret.StringData[ref.SecretKeyRef.Key]; !ok {
					t.Errorf("env %s reads key %q, which the Secret does not define", e.Name, ref.SecretKeyRef.Key)
				}
			}
		}
		for _, ref := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(m.configMaps[configMapName].Data[configKey], -1) {
			if !env[ref[1]] {
				t.Errorf("toolgate.yaml reads ${%s}, which the toolgate container's env does not set", ref[1])
			}
		}

		// Parked calls are in the Redis of this manifest, under a prefix
		// that replicas share.
		if cfg.Pending.Store != "redis" || cfg.Pending.RedisPrefix == "" {
			t.Errorf("pending: store %q prefix %q, want redis with a prefix", cfg.Pending.Store, cfg.Pending.RedisPrefix)
		}
		ru, err := url.Parse(cfg.Pending.RedisURL.Reveal())
		svc := m.services[redisName]
		if err != nil || svc == nil || ru.Hostname() != svc.Name || ru.Port() != strconv.Itoa(int(svc.Spec.Ports[0].Port)) {
			t.Errorf("pending.redis_url does not point at the Service %s", redisName)
		}
		if cfg.PublicURL != "https://toolgate.example.com" {
			t.Errorf("public_url is %q", cfg.PublicURL)
		}

		// The pod waits for its preStop sleeps and toolgate's graceful
		// shutdown after them.
		if err := graceCovers(pod, cfg.ShutdownGrace.Std()); err != nil {
			t.Error(err)
		}
	})
}

// mountPath is where the volume of ConfigMap name is mounted in c.
func mountPath(t *testing.T, pod *corev1.PodSpec, c *corev1.Container, name string) string {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != name {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if vm.Name == v.Name {
				return vm.MountPath
			}
		}
	}
	t.Fatalf("ConfigMap %s is not mounted in %s", name, c.Name)
	return ""
}

// mountedFile is the path at which key of ConfigMap name appears in c.
func mountedFile(t *testing.T, pod *corev1.PodSpec, c *corev1.Container, name, key string) string {
	t.Helper()
	dir := mountPath(t, pod, c, name)
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != name {
			continue
		}
		if len(v.ConfigMap.Items) == 0 {
			return path.Join(dir, key)
		}
		for _, it := range v.ConfigMap.Items {
			if it.Key == key {
				return path.Join(dir, it.Path)
			}
		}
	}
	t.Fatalf("key %s of ConfigMap %s is not projected", key, name)
	return ""
}

// TestPlaceholderSecretRefused: with the Secret as shipped, toolgate does
// not start, so the placeholder cannot end up signing approval links.
func TestPlaceholderSecretRefused(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		var environ []string
		for k, v := range m.secrets[secretName].StringData {
			environ = append(environ, k+"="+v)
		}
		_, err := loadConfigErr(t, m, environ)
		if err == nil || !strings.Contains(err.Error(), "approvals.secret") {
			t.Fatalf("the placeholder Secret is accepted (err %v); it must fail on approvals.secret", err)
		}
	})
}

// TestServiceLinks: with service links on, the kubelet gives toolgate
// TOOLGATE_APPROVALS_* and TOOLGATE_REDIS_* variables for the Services of
// this manifest; toolgate must start anyway (it ignores those names). The
// pods still turn service links off: toolgate needs none of them.
func TestServiceLinks(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		var links []string
		for _, name := range slices.Sorted(maps.Keys(m.services)) {
			links = append(links, serviceLinkEnv(m.services[name], "10.0.0.10")...)
		}
		environ := append(testEnviron(), links...)
		if _, err := loadConfigErr(t, m, environ); err != nil {
			t.Errorf("toolgate refuses the service-link variables %q: %v", links, err)
		}
		for name, d := range m.deployments {
			if sl := d.Spec.Template.Spec.EnableServiceLinks; sl == nil || *sl {
				t.Errorf("Deployment %s: enableServiceLinks is not false", name)
			}
		}
	})
}

// serviceLinkEnv is what the kubelet injects for svc when service links are
// on (pkg/kubelet/envvars: the Docker-link variables).
func serviceLinkEnv(svc *corev1.Service, ip string) []string {
	n := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_"))
	var env []string
	for i, p := range svc.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		proto := strings.ToUpper(string(p.Protocol))
		if proto == "" {
			proto = "TCP"
		}
		addr := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			env = append(env, n+"_SERVICE_HOST="+ip, n+"_SERVICE_PORT="+port, n+"_PORT="+addr)
		}
		if p.Name != "" {
			env = append(env, n+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))+"="+port)
		}
		pp := n + "_PORT_" + port + "_" + proto
		env = append(env, pp+"="+addr, pp+"_PROTO="+strings.ToLower(proto), pp+"_PORT="+port, pp+"_ADDR="+ip)
	}
	return env
}

// TestPolicyIsTheShippedExample: the policy ConfigMap is a verbatim copy of
// rego/example/notes.rego, whose Rego tests run with the rego package.
func TestPolicyIsTheShippedExample(t *testing.T) {
	want, err := os.ReadFile(shippedPolicy)
	if err != nil {
		t.Fatal(err)
	}
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		cm := m.configMaps[policyMapName]
		if cm == nil {
			t.Fatalf("no ConfigMap %s", policyMapName)
		}
		for key := range cm.Data {
			if !strings.HasSuffix(key, ".rego") && !strings.HasSuffix(key, ".json") && !strings.HasSuffix(key, ".yaml") {
				t.Errorf("policy key %q is neither .rego nor data: toolgate would skip it", key)
			}
		}
		if d := cmp.Diff(string(want), cm.Data["notes.rego"]); d != "" {
			t.Errorf("notes.rego differs from %s (-want +got):\n%s", shippedPolicy, d)
		}
	})
}

// TestRedis: append-only with fsync on every write, no eviction, and the
// Service in front of it.
func TestRedis(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		d := m.deployments[redisName]
		if d == nil {
			t.Fatalf("no Deployment %s", redisName)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("Redis must be one replica with the Recreate strategy")
		}
		redis := findContainer(t, &d.Spec.Template.Spec, "redis")
		for flag, want := range map[string]string{"--appendonly": "yes", "--appendfsync": "always", "--maxmemory-policy": "noeviction"} {
			if got := kubestrict.FlagValue(redis.Args, flag); got != want {
				t.Errorf("redis %s is %q, want %q", flag, got, want)
			}
		}
		if kubestrict.FlagValue(redis.Args, "--maxmemory") == "" {
			t.Errorf("redis has no --maxmemory: noeviction then only ends in an OOM kill")
		}
		svc := m.services[redisName]
		if svc == nil || !kubestrict.Selects(svc.Spec.Selector, d.Spec.Template.Labels) {
			t.Fatalf("Service %s does not select the Redis pod", redisName)
		}
	})
}

// TestReplicas: the tool Deployment runs several replicas (they share Redis
// and the prefix) and never drops below its count during a rollout.
func TestReplicas(t *testing.T) {
	bothFiles(t, func(t *testing.T, _ string, m *manifest) {
		d := m.deployments[appDeployment]
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("replicas is %v, want at least 2", d.Spec.Replicas)
		}
		if !kubestrict.Selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("the selector does not match the pod template")
		}
	})
}
