package helm

import (
	"os"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/deploy/internal/kubestrict"
)

// TestSidecarSnippet: the sidecar snippet of the chart's README decodes
// strictly as a pod spec and is the native sidecar deploy/kubernetes
// describes: restartPolicy Always, the probes on the admin port, the
// restricted security context, directory mounts only.
func TestSidecarSnippet(t *testing.T) {
	readme, err := os.ReadFile("toolgate/README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(# toolgate sidecar.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("no ```yaml block starting with \"# toolgate sidecar\" in the README")
	}
	var pod corev1.PodSpec
	if err := kubestrict.DecodeStrict(m[1], &pod); err != nil {
		t.Fatalf("the sidecar snippet: %v", err)
	}
	if len(pod.InitContainers) != 1 {
		t.Fatalf("%d init containers, want toolgate only", len(pod.InitContainers))
	}
	g := &gate{pod: &pod, c: &pod.InitContainers[0], ports: map[string]int32{}}
	for _, p := range g.c.Ports {
		g.ports[p.Name] = p.ContainerPort
	}
	if rp := g.c.RestartPolicy; rp == nil || *rp != corev1.ContainerRestartPolicyAlways {
		t.Errorf("toolgate is not a native sidecar (restartPolicy Always)")
	}
	checkSecurity(t, g)
	checkProbes(t, g)
	for _, vm := range g.c.VolumeMounts {
		if vm.SubPath != "" {
			t.Errorf("volume %s is mounted with a subPath", vm.Name)
		}
	}
	if got := g.mountedAt(t, "toolgate-config", configKey); got != kubestrict.FlagValue(g.c.Args, "--config") {
		t.Errorf("--config is %q but toolgate.yaml is mounted at %q", kubestrict.FlagValue(g.c.Args, "--config"), got)
	}
	g.mountedAt(t, "toolgate-policy", "")
}
