package helm

import (
	"os"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/deploy/internal/kubestrict"
	"github.com/toolgate/toolgate/policy"
)

// TestLint: helm lint --strict passes with the default values and with
// every option on.
func TestLint(t *testing.T) {
	for _, args := range [][]string{
		{"lint", "--strict", chartDir},
		{"lint", "--strict", chartDir, "-f", allOnValues},
	} {
		if out, err := runHelm(t, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// TestDefaults: with no values the chart makes one pod with the memory
// store, generated keys, an empty policy (every call denied) and the
// in-cluster approvals URL.
func TestDefaults(t *testing.T) {
	const fullname = release + "-toolgate"
	r := render(t)
	want := map[string][]string{
		"ServiceAccount": {fullname},
		"ConfigMap":      {fullname, fullname + "-policy"},
		"Secret":         {fullname},
		"Service":        {fullname, fullname + "-approvals"},
		"Deployment":     {fullname},
	}
	if d := gocmp.Diff(want, r.objects()); d != "" {
		t.Fatalf("objects (-want +got):\n%s", d)
	}
	g := checkGate(t, r, fullname, nil)
	if *g.d.Spec.Replicas != 1 || g.cfg.Pending.Store != "memory" {
		t.Errorf("replicas %d store %q, want 1 and memory", *g.d.Spec.Replicas, g.cfg.Pending.Store)
	}
	if want := "http://" + fullname + "-approvals." + namespace + ".svc:8081"; g.cfg.PublicURL != want {
		t.Errorf("public_url is %q, want %q", g.cfg.PublicURL, want)
	}
	if sa := r.serviceAccounts[fullname]; sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("the ServiceAccount automounts its token")
	}
	if g.pod.ServiceAccountName != fullname {
		t.Errorf("the pod runs as %q, want the chart's ServiceAccount", g.pod.ServiceAccountName)
	}
	// Both keys were generated, long enough for toolgate (the loader above
	// accepted the approvals secret) and different from each other.
	s := r.secrets[fullname]
	if len(s.Data["AGENT_KEY"]) < 32 || string(s.Data["AGENT_KEY"]) == string(s.Data["TOOLGATE_APPROVALS_SECRET"]) {
		t.Errorf("generated keys are short or equal")
	}
	if len(r.configMaps[fullname+"-policy"].Data) != 0 {
		t.Errorf("the default policy is not empty")
	}
	// Fail closed: with no policy, the shipped library allows nothing.
	if d := g.decide(t, "read_file", map[string]any{"path": "README.md"}); d.Action != policy.Deny {
		t.Errorf("the default policy decides %v on a read, want deny", d.Action)
	}
	for _, key := range []string{"checksum/config", "checksum/secret"} {
		if g.d.Spec.Template.Annotations[key] == "" {
			t.Errorf("no pod annotation %s", key)
		}
	}
	// A preStop sleep keeps the pod serving while endpoints drop it, and
	// the grace period covers it and toolgate's own drain.
	if l := g.c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 5 {
		t.Errorf("lifecycle %+v, want a preStop sleep of 5 s", l)
	}
	if grace := *g.pod.TerminationGracePeriodSeconds; grace < 5+int64(g.cfg.ShutdownGrace.Std().Seconds()) {
		t.Errorf("terminationGracePeriodSeconds %d does not cover the sleep and shutdown_grace %s", grace, g.cfg.ShutdownGrace)
	}
	// Before Kubernetes 1.30 there is no sleep action (and no shell in the image).
	if old := checkGate(t, render(t, "--kube-version", "1.29.0"), fullname, nil); old.c.Lifecycle != nil {
		t.Errorf("a preStop on Kubernetes 1.29: %+v", old.c.Lifecycle)
	}
}

// TestAllOn: ci/all-on-values.yaml switches every option on; every object
// is rendered, decodes strictly and agrees with the pod.
func TestAllOn(t *testing.T) {
	const fullname = release + "-gate" // nameOverride: gate
	r := render(t, "-f", allOnValues)
	want := map[string][]string{
		"ServiceAccount":      {"toolgate-ci"},
		"ConfigMap":           {fullname, fullname + "-policy", fullname + "-rules"},
		"Secret":              {fullname},
		"Service":             {fullname, fullname + "-approvals", fullname + "-metrics"},
		"Deployment":          {fullname},
		"Ingress":             {fullname + "-approvals"},
		"NetworkPolicy":       {fullname},
		"PodDisruptionBudget": {fullname},
		"ServiceMonitor":      {fullname},
	}
	if d := gocmp.Diff(want, r.objects()); d != "" {
		t.Fatalf("objects (-want +got):\n%s", d)
	}
	g := checkGate(t, r, fullname, nil)

	var values struct {
		Redis struct{ URL, Prefix string }
	}
	raw, err := os.ReadFile(allOnValues)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	if *g.d.Spec.Replicas != 3 || g.cfg.Pending.Store != "redis" {
		t.Errorf("replicas %d store %q, want 3 and redis", *g.d.Spec.Replicas, g.cfg.Pending.Store)
	}
	if g.cfg.Pending.RedisURL.Reveal() != values.Redis.URL || g.cfg.Pending.RedisPrefix != values.Redis.Prefix {
		t.Errorf("pending.redis_url/redis_prefix are not redis.url/redis.prefix of the values")
	}
	if strings.Contains(r.configMaps[fullname].Data[configKey], values.Redis.URL) {
		t.Errorf("the Redis URL (it may hold a password) is in the ConfigMap")
	}
	if !slices.Equal(g.cfg.Policy.Capabilities, []string{"crypto.hmac.sha256"}) {
		t.Errorf("policy.capabilities %v, want the values' [crypto.hmac.sha256]", g.cfg.Policy.Capabilities)
	}
	// Keys the chart passes through as toolgate's own.
	if g.cfg.Identity.JWT == nil || g.cfg.Identity.JWT.SubjectPrefix != "jwt:" || g.cfg.Upstreams[1].Mode != "plan" ||
		g.cfg.Policy.SubjectModes["batch"] != "dont_ask" || g.cfg.Policy.ModeHeader == nil || g.cfg.Policy.ModeHeader.Name != "X-Agent-Mode" ||
		g.cfg.Log.Decisions.MaskDecision != "/system/log/mask" {
		t.Errorf("subject_prefix, an upstream's mode, subject_modes, mode_header or log.decisions lost: %+v %+v %+v", g.cfg.Identity.JWT, g.cfg.Policy, g.cfg.Log)
	}
	if g.cfg.Policy.RulesFile == "" || g.cfg.Identity.JWT == nil || len(g.cfg.Approvals.Approvers) != 2 || len(g.cfg.Approvals.Notify) != 2 || len(g.cfg.Upstreams) != 2 {
		t.Errorf("the config lost part of the values: %+v", g.cfg)
	}
	// Approver identity and Slack: their secrets come from the Secret
	// (generated here), never from the ConfigMap.
	id, sl := g.cfg.Approvals.Identity, g.cfg.Approvals.Slack
	if id == nil || id.Type != "oidc" || id.ClientSecret == "" || len(id.CookieSecret) < 32 || sl == nil || sl.SigningSecret == "" || sl.Users["U012ABC"] != "bob@example.com" {
		t.Errorf("approvals.identity or approvals.slack lost part of the values: %+v %+v", id, sl)
	}
	if a := g.cfg.Approvals.Approvers; len(a) == 2 && (a[1].Key != "" || !slices.Equal(a[1].Groups, []string{"sre", "dev"})) {
		t.Errorf("an approver without secretKey became %+v", a[1])
	}
	if id != nil && strings.Contains(r.configMaps[fullname].Data[configKey], id.CookieSecret.Reveal()) {
		t.Errorf("the cookie secret is in the ConfigMap")
	}
	if g.cfg.Policy.Mode != "dont_ask" || g.cfg.Policy.Default != "ask" || g.cfg.Log.Level != "debug" {
		t.Errorf("policy.mode/default or log.level are not the values'")
	}
	// The policy files and the rules table are both in force, as the pod
	// would load them (policy.mode dont_ask turns the ask of r2 into deny).
	for _, tc := range []struct {
		tool, path string
		want       policy.Action
		rule       string
	}{
		{"read_file", "notes/a.md", policy.Allow, "r1"},
		{"delete_file", "notes/a.md", policy.Deny, "r3"},
		{"write_note", "notes/a.md", policy.Deny, "r2"},
	} {
		d := g.decide(t, tc.tool, map[string]any{"path": tc.path})
		if d.Action != tc.want || !slices.Contains(d.RuleIDs(), tc.rule) {
			t.Errorf("%s %s: %v by %v, want %v by %s", tc.tool, tc.path, d.Action, d.RuleIDs(), tc.want, tc.rule)
		}
	}
	if d := g.decide(t, "read_file", map[string]any{"path": "x"}); !slices.Contains(d.RuleIDs(), "chart.read") {
		t.Errorf("tools.rego of policy.files is not in force: rules %v", d.RuleIDs())
	}
	if g.pod.ServiceAccountName != "toolgate-ci" {
		t.Errorf("the pod runs as %q", g.pod.ServiceAccountName)
	}
	if !slices.ContainsFunc(g.c.Env, func(e corev1.EnvVar) bool { return e.Name == "OTEL_SERVICE_NAME" }) {
		t.Errorf("extraEnv is missing")
	}

	// The Ingress sends approvers to the approvals Service, at public_url.
	ing := r.ingresses[fullname+"-approvals"]
	if g.cfg.PublicURL != "https://"+ing.Spec.Rules[0].Host {
		t.Errorf("public_url %q is not the Ingress host %q", g.cfg.PublicURL, ing.Spec.Rules[0].Host)
	}
	for _, rule := range ing.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			svc := r.services[p.Backend.Service.Name]
			if p.Backend.Service.Name != fullname+"-approvals" || svc == nil || svc.Spec.Ports[0].Name != p.Backend.Service.Port.Name {
				t.Errorf("Ingress path %s goes to %s port %q, want the approvals Service", p.Path, p.Backend.Service.Name, p.Backend.Service.Port.Name)
			}
		}
	}

	// The ServiceMonitor scrapes /metrics on the metrics Service's admin port.
	sm := r.serviceMonitors[fullname]
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" {
		t.Errorf("ServiceMonitor is %s %s", sm.APIVersion, sm.Kind)
	}
	metrics := r.services[fullname+"-metrics"]
	if !kubestrict.Selects(sm.Spec.Selector.MatchLabels, metrics.Labels) {
		t.Errorf("the ServiceMonitor does not select the metrics Service")
	}
	for name, svc := range r.services {
		if name != metrics.Name && kubestrict.Selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
			t.Errorf("the ServiceMonitor also selects Service %s", name)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != metrics.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on port %q", sm.Spec.Endpoints, metrics.Spec.Ports[0].Name)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("ServiceMonitor namespaces %v, want [%s]", sm.Spec.NamespaceSelector.MatchNames, namespace)
	}

	// The PDB and the NetworkPolicy cover the toolgate pods; every port the
	// NetworkPolicy admits is a listener of the container.
	if pdb := r.pdbs[fullname]; !kubestrict.Selects(pdb.Spec.Selector.MatchLabels, g.d.Spec.Template.Labels) || pdb.Spec.MinAvailable.IntValue() != 2 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("the PodDisruptionBudget does not select the pods with minAvailable 2")
	}
	np := r.networkPolicies[fullname]
	if !kubestrict.Selects(np.Spec.PodSelector.MatchLabels, g.d.Spec.Template.Labels) {
		t.Errorf("the NetworkPolicy does not select the pods")
	}
	var admitted []string
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			t.Errorf("a NetworkPolicy rule admits every source")
		}
		for _, p := range rule.Ports {
			if g.portOf(*p.Port) == 0 {
				t.Errorf("the NetworkPolicy admits port %s, which is no listener", p.Port.String())
			}
			admitted = append(admitted, p.Port.String())
		}
	}
	slices.Sort(admitted)
	if !slices.Equal(admitted, []string{"admin", "approvals", "proxy"}) || len(np.Spec.Egress) != 2 {
		t.Errorf("NetworkPolicy admits %v with %d egress rules", admitted, len(np.Spec.Egress))
	}
}

// TestExistingObjects: with an existing Secret, policy ConfigMap and rules
// ConfigMap the chart makes none of them and points the pod at them.
func TestExistingObjects(t *testing.T) {
	const fullname = release + "-toolgate"
	r := render(t,
		"--set", "secret.existingSecret=gate-secrets",
		"--set", "policy.existingConfigMap=gate-policy",
		"--set", "policy.existingRulesConfigMap=gate-rules",
		"--set", "serviceAccount.create=false",
		"--set", "replicaCount=2",
		"--set", "pending.store=redis",
	)
	want := map[string][]string{
		"ConfigMap":  {fullname},
		"Service":    {fullname, fullname + "-approvals"},
		"Deployment": {fullname},
	}
	if d := gocmp.Diff(want, r.objects()); d != "" {
		t.Fatalf("objects (-want +got):\n%s", d)
	}
	given := map[string]string{
		"TOOLGATE_APPROVALS_SECRET":  "0123456789abcdefghijklmnopqrstuvwxyzABCD",
		"TOOLGATE_PENDING_REDIS_URL": "redis://redis:6379/0",
		"AGENT_KEY":                  "agent-key-0123456789",
	}
	g := checkGate(t, r, fullname, given)
	for _, e := range g.c.Env {
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil && ref.SecretKeyRef.Name != "gate-secrets" {
			t.Errorf("env %s reads Secret %s, want gate-secrets", e.Name, ref.SecretKeyRef.Name)
		}
	}
	if g.mountedAt(t, "gate-policy", "") != g.cfg.Policy.Dir || g.mountedAt(t, "gate-rules", "rules.yaml") != g.cfg.Policy.RulesFile {
		t.Errorf("the existing ConfigMaps are not at policy.dir and policy.rules_file")
	}
	if g.pod.ServiceAccountName != "default" {
		t.Errorf("the pod runs as %q, want default", g.pod.ServiceAccountName)
	}
	if _, ok := g.d.Spec.Template.Annotations["checksum/secret"]; ok {
		t.Errorf("checksum/secret of a Secret the chart does not make")
	}
	if g.cfg.Pending.RedisPrefix != "toolgate:"+namespace+":"+release+":" {
		t.Errorf("redis_prefix %q, want one per namespace and release", g.cfg.Pending.RedisPrefix)
	}
}

// TestRefused: values that would make a toolgate that cannot work, or that
// silently ignores a setting, fail the render with a message saying why.
func TestRefused(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"several replicas with the memory store", []string{"--set", "replicaCount=2"}, `pending.store is "memory"`},
		{"redis store without a URL", []string{"--set", "pending.store=redis"}, "redis.url is empty"},
		{"redis URL with the memory store", []string{"--set", "redis.url=redis://r:6379/0"}, `pending.store is "memory"`},
		{"misspelt top-level value", []string{"--set", "replicaCont=2"}, "replicaCont"},
		{"misspelt nested value", []string{"--set", "service.prot=80"}, "prot"},
		{"misspelt toolgate key", []string{"--set", "config.log.levle=debug"}, "levle"},
		{"unknown store", []string{"--set", "pending.store=disk"}, "pending.store"},
		{"secret value read by nothing", []string{"--set", "secret.values.AGENT_KY=x"}, "AGENT_KY is read by nothing"},
		{"short approvals secret", []string{"--set", "secret.values.TOOLGATE_APPROVALS_SECRET=short"}, "shorter than 32 bytes"},
		{"policy file toolgate skips", []string{"--set", "policy.files.notes\\.txt=x"}, "only .rego"},
		{"policy and an existing ConfigMap", []string{"--set", "policy.files.a\\.rego=package toolgate", "--set", "policy.existingConfigMap=p"}, "use one of them"},
		{"no upstream", []string{"--set", "config.upstreams=null"}, "upstreams"},
		{"PDB with both bounds", []string{"--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.maxUnavailable=1"}, "not both"},
		{"PDB with neither bound", []string{"--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.minAvailable=null"}, "set minAvailable or maxUnavailable"},
		{"redis URL in secret.values", []string{"--set", "pending.store=redis", "--set", "secret.values.TOOLGATE_PENDING_REDIS_URL=redis://r:6379/0"}, "set redis.url instead"},
		// A Slack webhook URL is a credential: the ConfigMap is no place for it.
		{"Slack webhook URL as url", []string{"--set", "config.approvals.notify[0].url=https://hooks.slack.com/services/T0/B0/X", "--set", "config.approvals.notify[0].format=slack"}, "urlSecretKey"},
		{"Teams webhook URL as url", []string{"--set", "config.approvals.notify[0].url=https://example.webhook.office.com/x", "--set", "config.approvals.notify[0].format=teams"}, "urlSecretKey"},
		{"urlSecretKey without its value", []string{"--set", "config.approvals.notify[0].urlSecretKey=SLACK_URL", "--set", "config.approvals.notify[0].format=slack"}, "secret.values.SLACK_URL is not given"},
		{"notify with url and urlSecretKey", []string{"--set", "config.approvals.notify[0].url=https://h.example.com/x", "--set", "config.approvals.notify[0].urlSecretKey=U", "--set", "secret.values.U=https://h.example.com/y"}, "notify"},
		// No volume of the pod could hold the file: toolgate would exit at start.
		{"JWKS file", []string{"--set", "config.identity.jwt.jwks_file=/etc/toolgate/jwks.json", "--set", "config.identity.jwt.issuer=https://i.example.com", "--set", "config.identity.jwt.audience[0]=toolgate"}, "jwks_file"},
		// 30 s of grace cannot hold a 5 s preStop sleep and a 25 s drain.
		{"grace shorter than the drain", []string{"--set", "config.shutdown_grace=25s"}, "must be longer than the preStop sleep (5 s) plus config.shutdown_grace (25s)"},
		// An agent's key must not be a secret that approves or speaks as toolgate.
		{"agent key is the approvals secret", []string{"--set", "config.identity.api_keys[0].subject=agent", "--set", "config.identity.api_keys[0].secretKey=TOOLGATE_APPROVALS_SECRET"}, "both name the Secret key TOOLGATE_APPROVALS_SECRET"},
		{"agent key is the approver proxy's secret", []string{"--set", "config.approvals.identity.type=trusted_header", "--set", "config.approvals.identity.user_header=X-User", "--set", "config.approvals.identity.secretKey=AGENT_KEY"}, "config.approvals.identity.secretKey both name the Secret key AGENT_KEY"},
		{"grace shorter than a drain in minutes", []string{"--set", "config.shutdown_grace=1m30s", "--set", "terminationGracePeriodSeconds=95"}, "terminationGracePeriodSeconds (95)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderErr(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("render error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}

	// A grace period longer than the sleep and the drain renders.
	r := render(t, "--set", "config.shutdown_grace=1m30s", "--set", "terminationGracePeriodSeconds=96")
	if d := r.deployments[release+"-toolgate"]; d == nil || *d.Spec.Template.Spec.TerminationGracePeriodSeconds != 96 {
		t.Errorf("deployment %v: want terminationGracePeriodSeconds 96", d)
	}

	// The same values with Redis render: the refusal is about the store.
	r = render(t, "--set", "replicaCount=2", "--set", "pending.store=redis", "--set", "redis.url=redis://redis:6379/0")
	g := checkGate(t, r, release+"-toolgate", nil)
	if *g.d.Spec.Replicas != 2 || g.cfg.Pending.Store != "redis" {
		t.Errorf("replicas %d store %q", *g.d.Spec.Replicas, g.cfg.Pending.Store)
	}
}

// TestChecksums: a change to toolgate.yaml or to a given secret rolls the
// pods (it is read at start only); a policy change does not (toolgate
// hot-reloads it).
func TestChecksums(t *testing.T) {
	annotations := func(args ...string) map[string]string {
		t.Helper()
		r := render(t, args...)
		return r.deployments[release+"-toolgate"].Spec.Template.Annotations
	}
	base := annotations()
	if got := annotations(); got["checksum/config"] != base["checksum/config"] || got["checksum/secret"] != base["checksum/secret"] {
		t.Fatalf("the checksums change between two renders of the same values")
	}
	if got := annotations("--set", "config.log.level=debug"); got["checksum/config"] == base["checksum/config"] {
		t.Errorf("a config change leaves checksum/config alone: the pods would keep the old toolgate.yaml")
	}
	if got := annotations("--set", "secret.values.AGENT_KEY=another-agent-key"); got["checksum/secret"] == base["checksum/secret"] {
		t.Errorf("a secret change leaves checksum/secret alone")
	}
	if got := annotations("--set", "policy.files.more\\.rego=package toolgate"); got["checksum/config"] != base["checksum/config"] || got["checksum/secret"] != base["checksum/secret"] {
		t.Errorf("a policy change rolls the pods; it should be hot-reloaded")
	}
}

// TestNetworkPolicyClosed: a NetworkPolicy with no peers admits nobody; it
// never falls open to every source.
func TestNetworkPolicyClosed(t *testing.T) {
	r := render(t, "--set", "networkPolicy.enabled=true")
	np := r.networkPolicies[release+"-toolgate"]
	if np == nil {
		t.Fatal("no NetworkPolicy")
	}
	if !slices.Contains(np.Spec.PolicyTypes, "Ingress") || len(np.Spec.Ingress) != 0 {
		t.Errorf("policyTypes %v with %d ingress rules, want Ingress with none", np.Spec.PolicyTypes, len(np.Spec.Ingress))
	}
	if slices.Contains(np.Spec.PolicyTypes, "Egress") {
		t.Errorf("egress is restricted though networkPolicy.egress is empty")
	}
}

// TestPublicURLFromIngress: without config.public_url, approval links use
// the Ingress host, https only when its TLS covers that host.
func TestPublicURLFromIngress(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "ingress.enabled=true"}, "http://toolgate.example.com"},
		{[]string{"--set", "ingress.enabled=true", "--set", "ingress.tls[0].secretName=tls", "--set", "ingress.tls[0].hosts[0]=toolgate.example.com"}, "https://toolgate.example.com"},
	} {
		r := render(t, tc.args...)
		g := checkGate(t, r, release+"-toolgate", nil)
		if g.cfg.PublicURL != tc.want {
			t.Errorf("%v: public_url %q, want %q", tc.args, g.cfg.PublicURL, tc.want)
		}
	}
}
