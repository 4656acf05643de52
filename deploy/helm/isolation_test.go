package helm

import (
	"strings"
	"testing"
)

// TestRedisPrefixPerNamespace: two teams that each install release
// "toolgate" in their own namespace against one shared Redis get prefixes
// of their own by default; with one prefix, each team's approvers would
// list and approve the other's parked calls, and its pods run them.
func TestRedisPrefixPerNamespace(t *testing.T) {
	prefix := func(ns string) string {
		out, err := runHelm(t, "template", "toolgate", chartDir, "--namespace", ns, "--kube-version", kubeVersion,
			"--set", "pending.store=redis", "--set", "redis.url=redis://shared-redis.infra:6379/0")
		if err != nil {
			t.Fatal(err)
		}
		r, err := parse(out)
		if err != nil {
			t.Fatal(err)
		}
		g := checkGate(t, r, "toolgate", nil)
		return g.cfg.Pending.RedisPrefix
	}
	if a, b := prefix("team-a"), prefix("team-b"); a == b || a != "toolgate:team-a:toolgate:" {
		t.Errorf("releases team-a/toolgate and team-b/toolgate have redis_prefix %q and %q, want toolgate:<namespace>:<release>:", a, b)
	}
}

// TestNotifyURLInSecret: a Slack or Teams webhook URL is a credential. It
// reaches toolgate from the Secret (urlSecretKey), never through the
// ConfigMap, which roles that may not read Secrets may read.
func TestNotifyURLInSecret(t *testing.T) {
	const url = "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX"
	r := render(t, "--set", "config.approvals.notify[0].urlSecretKey=SLACK_WEBHOOK_URL",
		"--set", "config.approvals.notify[0].format=slack", "--set", "secret.values.SLACK_WEBHOOK_URL="+url)
	g := checkGate(t, r, release+"-toolgate", nil)
	if n := g.cfg.Approvals.Notify; len(n) != 1 || n[0].URL != url || n[0].Format != "slack" {
		t.Errorf("toolgate notifies %+v, want the Secret's Slack URL", n)
	}
	for name, cm := range r.configMaps {
		for key, text := range cm.Data {
			if strings.Contains(text, "/services/T0000/") {
				t.Errorf("ConfigMap %s key %s holds the webhook's path", name, key)
			}
		}
	}
	// A CloudEvents URL, whose requests are signed with a secret of their
	// own, may stay in the ConfigMap.
	r = render(t, "--set", "config.approvals.notify[0].url=https://hooks.example.com/toolgate")
	if g := checkGate(t, r, release+"-toolgate", nil); len(g.cfg.Approvals.Notify) != 1 || g.cfg.Approvals.Notify[0].URL != "https://hooks.example.com/toolgate" {
		t.Errorf("toolgate notifies %+v", g.cfg.Approvals.Notify)
	}
}

// TestRedisURLSchemes: every Redis URL form toolgate reads renders.
func TestRedisURLSchemes(t *testing.T) {
	for _, u := range []string{
		"redis://r:6379/0", "rediss://:pw@r:6380/0", "unix:///run/redis.sock",
		"redis+sentinel://s:26379/mymaster", "redis-sentinel://s:26379/mymaster", "rediss+sentinel://:pw@s:26379/mymaster",
		"redis+cluster://r0:6379?addr=r1:6379", "rediss+cluster://:pw@r0:6380",
	} {
		if _, err := renderErr(t, "--set", "pending.store=redis", "--set", "redis.url="+u); err != nil {
			t.Errorf("redis.url %s: %v", u, err)
		}
	}
}
