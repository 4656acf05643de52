package config

import (
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
