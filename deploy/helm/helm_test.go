package helm

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/deploy/internal/kubestrict"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rego"
)

const (
	chartDir    = "toolgate"
	allOnValues = "toolgate/ci/all-on-values.yaml"
	release     = "rel"
	namespace   = "tools"
	// The chart requires Kubernetes >= 1.25; a helm built with go install
	// assumes 1.20 unless told.
	kubeVersion = "1.33.0"
	configKey   = "toolgate.yaml"
)

// helmBinary is $TOOLGATE_TEST_HELM, else helm on PATH. Without one the test is
// skipped on a developer's machine, and fails under CI=true: CI must never
// count an unrendered chart as checked.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOOLGATE_TEST_HELM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no helm binary (TOOLGATE_TEST_HELM unset and no helm on PATH); .ci/run builds one")
	}
	t.Skip("no helm binary: set TOOLGATE_TEST_HELM or put helm on PATH")
	return ""
}

// runHelm runs helm with its config, cache and data homes in a temporary
// directory, so a test never reads or writes the user's helm setup.
func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin := helmBinary(t)
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// templateArgs is `helm template` of the chart with extra flags.
func templateArgs(extra ...string) []string {
	return append([]string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}, extra...)
}

func renderErr(t *testing.T, extra ...string) (*rendered, error) {
	t.Helper()
	out, err := runHelm(t, templateArgs(extra...)...)
	if err != nil {
		return nil, err
	}
	return parse(out)
}

func render(t *testing.T, extra ...string) *rendered {
	t.Helper()
	r, err := renderErr(t, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes (k8s.io/api has no type for it). Decoded strictly, so a
// field the chart adds must be added here too.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func (s *serviceMonitor) GetName() string      { return s.Metadata.Name }
func (s *serviceMonitor) GetNamespace() string { return s.Metadata.Namespace }

// rendered is one render of the chart, decoded into the typed objects.
type rendered struct {
	serviceAccounts map[string]*corev1.ServiceAccount
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	services        map[string]*corev1.Service
	deployments     map[string]*appsv1.Deployment
	ingresses       map[string]*networkingv1.Ingress
	networkPolicies map[string]*networkingv1.NetworkPolicy
	pdbs            map[string]*policyv1.PodDisruptionBudget
	serviceMonitors map[string]*serviceMonitor
}

// parse strictly decodes every document by its apiVersion and kind; a kind
// the chart does not make, two objects of one kind and name, or an object
// with its own namespace (helm install -n decides it) is an error.
func parse(data []byte) (*rendered, error) {
	r := &rendered{
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		configMaps:      map[string]*corev1.ConfigMap{},
		secrets:         map[string]*corev1.Secret{},
		services:        map[string]*corev1.Service{},
		deployments:     map[string]*appsv1.Deployment{},
		ingresses:       map[string]*networkingv1.Ingress{},
		networkPolicies: map[string]*networkingv1.NetworkPolicy{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		serviceMonitors: map[string]*serviceMonitor{},
	}
	for i, doc := range kubestrict.SplitDocuments(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ServiceAccount":
			err = kubestrict.DecodeInto(doc, r.serviceAccounts)
		case "v1 ConfigMap":
			err = kubestrict.DecodeInto(doc, r.configMaps)
		case "v1 Secret":
			err = kubestrict.DecodeInto(doc, r.secrets)
		case "v1 Service":
			err = kubestrict.DecodeInto(doc, r.services)
		case "apps/v1 Deployment":
			err = kubestrict.DecodeInto(doc, r.deployments)
		case "networking.k8s.io/v1 Ingress":
			err = kubestrict.DecodeInto(doc, r.ingresses)
		case "networking.k8s.io/v1 NetworkPolicy":
			err = kubestrict.DecodeInto(doc, r.networkPolicies)
		case "policy/v1 PodDisruptionBudget":
			err = kubestrict.DecodeInto(doc, r.pdbs)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			err = kubestrict.DecodeInto(doc, r.serviceMonitors)
		default:
			err = fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, tm.Kind, err)
		}
	}
	return r, nil
}

// objects lists the names of every kind, for comparing with what a render
// must make.
func (r *rendered) objects() map[string][]string {
	out := map[string][]string{}
	add := func(kind string, names []string) {
		if len(names) > 0 {
			out[kind] = names
		}
	}
	add("ServiceAccount", slices.Sorted(maps.Keys(r.serviceAccounts)))
	add("ConfigMap", slices.Sorted(maps.Keys(r.configMaps)))
	add("Secret", slices.Sorted(maps.Keys(r.secrets)))
	add("Service", slices.Sorted(maps.Keys(r.services)))
	add("Deployment", slices.Sorted(maps.Keys(r.deployments)))
	add("Ingress", slices.Sorted(maps.Keys(r.ingresses)))
	add("NetworkPolicy", slices.Sorted(maps.Keys(r.networkPolicies)))
	add("PodDisruptionBudget", slices.Sorted(maps.Keys(r.pdbs)))
	add("ServiceMonitor", slices.Sorted(maps.Keys(r.serviceMonitors)))
	return out
}

// gate is what every render is checked for: the toolgate Deployment, its
// pod, container and config, as the cluster would run them.
type gate struct {
	d       *appsv1.Deployment
	pod     *corev1.PodSpec
	c       *corev1.Container
	ports   map[string]int32 // container ports by name
	cfg     *config.Config
	cfgText string
	environ []string
	engine  *policy.Engine // nil when the policy is an existing ConfigMap
}

// checkGate runs the checks that hold for every set of values and returns
// the gate for more. environ gives the Secret's values when the chart made
// no Secret (existingSecret).
func checkGate(t *testing.T, r *rendered, fullname string, environ map[string]string) *gate {
	t.Helper()
	g := &gate{d: r.deployments[fullname]}
	if g.d == nil || len(r.deployments) != 1 {
		t.Fatalf("want exactly the Deployment %q, got %v", fullname, slices.Collect(maps.Keys(r.deployments)))
	}
	g.pod = &g.d.Spec.Template.Spec
	if len(g.pod.Containers) != 1 || g.pod.Containers[0].Name != "toolgate" || len(g.pod.InitContainers) != 0 {
		t.Fatalf("the pod must hold the one container toolgate, got %d containers", len(g.pod.Containers))
	}
	g.c = &g.pod.Containers[0]
	g.ports = map[string]int32{}
	for _, p := range g.c.Ports {
		g.ports[p.Name] = p.ContainerPort
	}
	if !kubestrict.Selects(g.d.Spec.Selector.MatchLabels, g.d.Spec.Template.Labels) {
		t.Errorf("the Deployment's selector does not match its pod template")
	}

	checkSecurity(t, g)
	checkProbes(t, g)
	checkVolumes(t, r, g)
	g.environ = checkEnv(t, r, g, environ)
	g.cfg = loadConfig(t, r, g)
	checkListeners(t, g)
	checkServices(t, r, fullname, g)
	g.engine = checkPolicyCompiles(t, r, g)

	for _, key := range []string{"checksum/config"} {
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(g.d.Spec.Template.Annotations[key]) {
			t.Errorf("pod annotation %s is %q, want a sha256", key, g.d.Spec.Template.Annotations[key])
		}
	}
	grace := int64(30)
	if g.pod.TerminationGracePeriodSeconds != nil {
		grace = *g.pod.TerminationGracePeriodSeconds
	}
	if float64(grace) <= g.cfg.ShutdownGrace.Std().Seconds() {
		t.Errorf("terminationGracePeriodSeconds %d is not longer than shutdown_grace %s", grace, g.cfg.ShutdownGrace.Std())
	}
	return g
}

// checkSecurity: the restricted Pod Security Standard, no API token, no
// service links.
func checkSecurity(t *testing.T, g *gate) {
	t.Helper()
	pod, c := g.pod, g.c
	if v := pod.AutomountServiceAccountToken; v == nil || *v {
		t.Errorf("the pod mounts a service-account token; toolgate never talks to the API")
	}
	if v := pod.EnableServiceLinks; v == nil || *v {
		t.Errorf("enableServiceLinks is not false")
	}
	psc := cmp.Or(pod.SecurityContext, &corev1.PodSecurityContext{})
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("no securityContext on the toolgate container")
	}
	nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	if !nonRoot {
		t.Errorf("toolgate may run as root")
	}
	if uid := cmp.Or(sc.RunAsUser, psc.RunAsUser); uid == nil || *uid == 0 {
		t.Errorf("runAsUser is not a non-zero uid")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("the root filesystem is writable")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities are not drop [ALL] with nothing added: %+v", sc.Capabilities)
	}
	seccomp := cmp.Or(sc.SeccompProfile, psc.SeccompProfile)
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the seccomp profile is not RuntimeDefault")
	}
	if len(c.Resources.Requests) == 0 || len(c.Resources.Limits) == 0 {
		t.Errorf("toolgate has no resource requests or limits")
	}
}

// checkProbes: startup and readiness on /readyz, liveness on /livez, all on
// the admin listener.
func checkProbes(t *testing.T, g *gate) {
	t.Helper()
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{
		{"startup", g.c.StartupProbe, "/readyz"},
		{"readiness", g.c.ReadinessProbe, "/readyz"},
		{"liveness", g.c.LivenessProbe, "/livez"},
	} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("toolgate has no httpGet %s probe", p.kind)
		case p.probe.HTTPGet.Path != p.path || g.portOf(p.probe.HTTPGet.Port) != g.ports["admin"] || g.ports["admin"] == 0:
			t.Errorf("the %s probe is %s on port %s, want %s on the admin port %d", p.kind, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, g.ports["admin"])
		case p.probe.TimeoutSeconds < 3:
			// A flood of the admin port makes a probe wait for one of its
			// 64 places; Kubernetes' default of 1 s would fail it, and a
			// failed liveness probe restarts toolgate, losing what it holds.
			t.Errorf("the %s probe times out after %d s, want 3 s or more", p.kind, max(p.probe.TimeoutSeconds, 1))
		}
	}
}

// portOf resolves a port number or container port name.
func (g *gate) portOf(p intstr.IntOrString) int32 {
	if p.Type == intstr.String {
		return g.ports[p.StrVal]
	}
	return p.IntVal
}

// checkVolumes: no subPath anywhere (a subPath mount never sees a
// ConfigMap update), and every volume is a ConfigMap that exists in the
// render or was named in the values.
func checkVolumes(t *testing.T, r *rendered, g *gate) {
	t.Helper()
	for _, vm := range g.c.VolumeMounts {
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			t.Errorf("volume %s is mounted with a subPath; ConfigMap updates would never reach it", vm.Name)
		}
		if !vm.ReadOnly {
			t.Errorf("volume %s is mounted writable", vm.Name)
		}
	}
	for _, v := range g.pod.Volumes {
		if v.ConfigMap == nil {
			t.Errorf("volume %s is not a ConfigMap", v.Name)
		}
	}
}

// mountedAt is where key of ConfigMap name appears in the container ("" for
// the whole directory when key is "").
func (g *gate) mountedAt(t *testing.T, name, key string) string {
	t.Helper()
	for _, v := range g.pod.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != name {
			continue
		}
		for _, vm := range g.c.VolumeMounts {
			if vm.Name != v.Name {
				continue
			}
			if key == "" {
				if len(v.ConfigMap.Items) > 0 {
					t.Errorf("ConfigMap %s is mounted with items; a policy directory must be whole", name)
				}
				return vm.MountPath
			}
			if len(v.ConfigMap.Items) == 0 {
				return path.Join(vm.MountPath, key)
			}
			for _, it := range v.ConfigMap.Items {
				if it.Key == key {
					return path.Join(vm.MountPath, it.Path)
				}
			}
		}
	}
	t.Fatalf("ConfigMap %s (key %q) is not mounted in toolgate", name, key)
	return ""
}

// checkEnv: every secretKeyRef names one Secret, which the chart made (and
// which holds the key) or which the values named; every ${NAME} of
// toolgate.yaml is set. It returns the environment the container gets.
func checkEnv(t *testing.T, r *rendered, g *gate, given map[string]string) []string {
	t.Helper()
	var environ []string
	env := map[string]bool{}
	for _, e := range g.c.Env {
		env[e.Name] = true
		switch {
		case e.ValueFrom == nil:
			environ = append(environ, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if ref.Optional != nil && *ref.Optional {
				t.Errorf("env %s: an optional secret would start toolgate without it", e.Name)
			}
			if s := r.secrets[ref.Name]; s != nil {
				v, ok := s.Data[ref.Key]
				if !ok {
					t.Errorf("env %s reads key %q, which the Secret %s does not hold", e.Name, ref.Key, ref.Name)
				}
				environ = append(environ, e.Name+"="+string(v))
				continue
			}
			v, ok := given[ref.Key]
			if !ok {
				t.Errorf("env %s reads Secret %s key %s, which is neither rendered nor given by the test", e.Name, ref.Name, ref.Key)
			}
			environ = append(environ, e.Name+"="+v)
		default:
			t.Errorf("env %s comes from neither a value nor a Secret", e.Name)
		}
	}
	for _, ref := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(g.configText(t, r), -1) {
		if !env[ref[1]] {
			t.Errorf("toolgate.yaml reads ${%s}, which the container's env does not set", ref[1])
		}
	}
	return environ
}

// configText is toolgate.yaml as the container reads it (--config).
func (g *gate) configText(t *testing.T, r *rendered) string {
	t.Helper()
	if g.cfgText != "" {
		return g.cfgText
	}
	cfgPath := kubestrict.FlagValue(g.c.Args, "--config")
	for name, cm := range r.configMaps {
		if text, ok := cm.Data[configKey]; ok && g.mountedAt(t, name, configKey) == cfgPath {
			g.cfgText = text
			return text
		}
	}
	t.Fatalf("no rendered ConfigMap with %s is mounted at --config %q", configKey, cfgPath)
	return ""
}

// loadConfig runs toolgate's own loader on the rendered toolgate.yaml with
// the container's environment.
func loadConfig(t *testing.T, r *rendered, g *gate) *config.Config {
	t.Helper()
	file := filepath.Join(t.TempDir(), configKey)
	if err := os.WriteFile(file, []byte(g.configText(t, r)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Source{File: file, Environ: g.environ})
	if err != nil {
		t.Fatalf("toolgate refuses the rendered toolgate.yaml: %v", err)
	}
	if !cfg.Policy.Watching() {
		t.Errorf("policy.watch is off: ConfigMap updates would not be picked up")
	}
	if dir := g.policyConfigMap(t, cfg); g.mountedAt(t, dir, "") != cfg.Policy.Dir {
		t.Errorf("policy.dir %q is not where the policy ConfigMap %s is mounted", cfg.Policy.Dir, dir)
	}
	return cfg
}

// policyConfigMap is the name of the ConfigMap mounted at policy.dir.
func (g *gate) policyConfigMap(t *testing.T, cfg *config.Config) string {
	t.Helper()
	for _, vm := range g.c.VolumeMounts {
		if vm.MountPath != cfg.Policy.Dir {
			continue
		}
		for _, v := range g.pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				return v.ConfigMap.Name
			}
		}
	}
	t.Fatalf("nothing is mounted at policy.dir %q", cfg.Policy.Dir)
	return ""
}

// checkListeners: each listener binds every interface (probes and Services
// dial the pod IP) on the container port of its name.
func checkListeners(t *testing.T, g *gate) {
	t.Helper()
	for key, addr := range map[string]string{"proxy": g.cfg.Listen.Proxy, "approvals": g.cfg.Listen.Approvals, "admin": g.cfg.Listen.Admin} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("listen.%s %q: %v", key, addr, err)
			continue
		}
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			t.Errorf("listen.%s binds %s; the pod IP must be reachable", key, host)
		}
		if g.ports[key] == 0 || port != strconv.Itoa(int(g.ports[key])) {
			t.Errorf("listen.%s port %s, but the container port %q is %d", key, port, key, g.ports[key])
		}
	}
}

// checkServices: the agents' Service exposes the proxy listener only, the
// approvals Service the approvals listener only, and only a metrics Service
// may expose admin.
func checkServices(t *testing.T, r *rendered, fullname string, g *gate) {
	t.Helper()
	want := map[string]string{fullname: "proxy", fullname + "-approvals": "approvals"}
	if len(r.serviceMonitors) > 0 {
		want[fullname+"-metrics"] = "admin"
	}
	got := map[string]string{}
	for name, svc := range r.services {
		if !kubestrict.Selects(svc.Spec.Selector, g.d.Spec.Template.Labels) {
			t.Errorf("Service %s does not select the toolgate pods", name)
		}
		if len(svc.Spec.Ports) != 1 {
			t.Errorf("Service %s exposes %d ports, want one", name, len(svc.Spec.Ports))
			continue
		}
		target := g.portOf(svc.Spec.Ports[0].TargetPort)
		for listener, port := range g.ports {
			if port == target {
				got[name] = listener
			}
		}
	}
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("Services and the listener each targets (-want +got):\n%s", d)
	}
}

// checkPolicyCompiles builds the real policy engine from the rendered
// policy directory and rules table, as toolgate does at start. It returns
// nil when either is an existing ConfigMap, which the render does not hold.
func checkPolicyCompiles(t *testing.T, r *rendered, g *gate) *policy.Engine {
	t.Helper()
	cm := r.configMaps[g.policyConfigMap(t, g.cfg)]
	if cm == nil {
		return nil
	}
	dir := t.TempDir()
	for name, text := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := policy.Options{Library: rego.Library(), NativeLibrary: true, Policies: os.DirFS(dir)}
	if g.cfg.Policy.RulesFile != "" {
		rulesDir, rulesKey := path.Split(g.cfg.Policy.RulesFile)
		var rules *corev1.ConfigMap
		for name, c := range r.configMaps {
			if _, ok := c.Data[rulesKey]; ok && g.mountedAt(t, name, rulesKey) == path.Join(rulesDir, rulesKey) {
				rules = c
			}
		}
		if rules == nil {
			return nil
		}
		opts.RulesFile = filepath.Join(t.TempDir(), rulesKey)
		if err := os.WriteFile(opts.RulesFile, []byte(rules.Data[rulesKey]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	def := policy.Deny
	if g.cfg.Policy.Default == "ask" {
		def = policy.Ask
	}
	opts.Default = def
	e, err := policy.New(context.Background(), opts)
	if err != nil {
		t.Fatalf("the rendered policy does not compile: %v", err)
	}
	return e
}

// decide is the engine's decision on a REST call of tool with args.
func (g *gate) decide(t *testing.T, tool string, args map[string]any) policy.Decision {
	t.Helper()
	if g.engine == nil {
		t.Fatal("no policy engine: the policy is not in the render")
	}
	d, err := g.engine.Decide(context.Background(), &policy.Input{
		CallID:   "chart-test",
		Kind:     policy.KindREST,
		Mode:     g.cfg.Policy.Mode,
		Phase:    policy.PhaseCall,
		Upstream: policy.Upstream{Name: g.cfg.Upstreams[0].Name, Protocol: "rest"},
		Subject:  policy.Subject{ID: "agent-42", Authenticated: true},
		Tool:     policy.NewTool(tool, args, g.cfg.Upstreams[0].TargetArgs),
		HTTP:     policy.HTTP{Method: "POST", Path: "/tools/" + tool},
	})
	if err != nil {
		t.Fatalf("decide %s: %v", tool, err)
	}
	return d
}
