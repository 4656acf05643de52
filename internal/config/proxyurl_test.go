package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLoad_ProxyPublicURL: proxy_public_url is optional (status URLs stay
// relative without it), read from the file or TOOLGATE_PROXY_PUBLIC_URL,
// and refused with its key when it is not a base for URLs.
func TestLoad_ProxyPublicURL(t *testing.T) {
	c := mustLoad(t, Source{File: writeConfig(t, minimalYAML), Environ: minimalEnv})
	if c.ProxyPublicURL != "" {
		t.Errorf("proxy_public_url defaults to %q, want empty", c.ProxyPublicURL)
	}

	c = mustLoad(t, Source{File: writeConfig(t, minimalYAML+"proxy_public_url: https://gw.example.com/tg\n"), Environ: minimalEnv})
	if c.ProxyPublicURL != "https://gw.example.com/tg" {
		t.Errorf("proxy_public_url from the file is %q", c.ProxyPublicURL)
	}

	c = mustLoad(t, Source{File: writeConfig(t, minimalYAML), Environ: withEnv("TOOLGATE_PROXY_PUBLIC_URL=http://10.0.0.1:8080")})
	if c.ProxyPublicURL != "http://10.0.0.1:8080" {
		t.Errorf("proxy_public_url from the environment is %q", c.ProxyPublicURL)
	}

	for _, bad := range []string{"/tg", "ftp://gw.example.com", "https://gw.example.com/tg?via=agent", "https://gw.example.com/#calls"} {
		err := loadErr(t, Source{File: writeConfig(t, minimalYAML+"proxy_public_url: \""+bad+"\"\n"), Environ: minimalEnv})
		if diff := cmp.Diff([]string{"proxy_public_url"}, errorKeys(err)); diff != "" {
			t.Errorf("proxy_public_url %q: error keys (-want +got):\n%s", bad, diff)
		}
	}
}

// TestLoad_UpstreamURLPath: an upstream's URL may carry a path that calls
// are joined under, but no query or fragment: an approved call's path
// would be appended inside the query, and a live call's query merged
// with it, a parameter then reaching the upstream twice though the
// policy saw it once.
func TestLoad_UpstreamURLPath(t *testing.T) {
	upstream := func(u string) string {
		return strings.Replace(minimalYAML, "http://127.0.0.1:9001", u, 1)
	}
	c := mustLoad(t, Source{File: writeConfig(t, upstream("http://127.0.0.1:9001/api/v1")), Environ: minimalEnv})
	if got := c.Upstreams[0].URL; got != "http://127.0.0.1:9001/api/v1" {
		t.Errorf("upstream url %q", got)
	}
	for _, bad := range []string{"http://127.0.0.1:9001/api?tenant=acme", "http://127.0.0.1:9001/api?", "http://127.0.0.1:9001/api#x"} {
		err := loadErr(t, Source{File: writeConfig(t, upstream(bad)), Environ: minimalEnv})
		if diff := cmp.Diff([]string{"upstreams[0].url"}, errorKeys(err)); diff != "" {
			t.Errorf("upstream url %q: error keys (-want +got):\n%s", bad, diff)
		}
	}
}
