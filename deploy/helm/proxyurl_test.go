package helm

import "testing"

// TestProxyPublicURL: config.proxy_public_url reaches toolgate.yaml when
// set and is left out when empty; the schema refuses one with a query.
func TestProxyPublicURL(t *testing.T) {
	g := checkGate(t, render(t), release+"-toolgate", nil)
	if g.cfg.ProxyPublicURL != "" {
		t.Errorf("proxy_public_url is %q by default, want empty", g.cfg.ProxyPublicURL)
	}
	const want = "https://gw.example.com/tg"
	g = checkGate(t, render(t, "--set", "config.proxy_public_url="+want), release+"-toolgate", nil)
	if g.cfg.ProxyPublicURL != want {
		t.Errorf("proxy_public_url is %q, want %q", g.cfg.ProxyPublicURL, want)
	}
	if _, err := renderErr(t, "--set", "config.proxy_public_url=https://gw.example.com/?x=1"); err == nil {
		t.Error("a proxy_public_url with a query rendered")
	}
}
