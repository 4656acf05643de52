package config

import (
	"strings"
	"testing"
	"time"
)

// defaultDecisions is log.decisions with every default applied.
func defaultDecisions() Decisions {
	return Decisions{
		Console:      new(true),
		MaskDecision: "/system/log/mask",
		DropDecision: "/system/log/drop",
		Service: DecisionService{
			Resource:    "/logs",
			Timeout:     Duration(10 * time.Second),
			BufferBytes: 16 << 20,
			MinDelay:    Duration(5 * time.Second),
			MaxDelay:    Duration(30 * time.Second),
		},
	}
}

func TestDecisions_Load(t *testing.T) {
	path := writeConfig(t, minimalYAML+`log:
  decisions:
    console: false
    mask_decision: /toolgate/log/mask
    service:
      url: https://logs.example.com/v1
      token: ${LOG_TOKEN}
      buffer_bytes: 4MiB
      min_delay: 2s
      max_delay: 10s
`)
	c := mustLoad(t, Source{File: path, Environ: withEnv("LOG_TOKEN=tok-123", "TOOLGATE_LOG_DECISIONS_SERVICE_TIMEOUT=3s")})
	d := c.Log.Decisions
	if d.ConsoleOn() || d.MaskDecision != "/toolgate/log/mask" || d.DropDecision != "/system/log/drop" {
		t.Errorf("decisions = %+v", d)
	}
	s := d.Service
	if s.URL != "https://logs.example.com/v1" || s.Token.Reveal() != "tok-123" || s.BufferBytes != 4<<20 ||
		s.MinDelay.Std() != 2*time.Second || s.MaxDelay.Std() != 10*time.Second || s.Timeout.Std() != 3*time.Second || s.Resource != "/logs" {
		t.Errorf("service = %+v", s)
	}
	out, err := c.Redacted()
	if err != nil || strings.Contains(string(out), "tok-123") || !strings.Contains(string(out), "token: '[redacted]'") {
		t.Errorf("Redacted() = %v\n%s", err, out)
	}
}

func TestDecisions_Validate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Decisions)
		want   string
	}{
		{"mask path", func(d *Decisions) { d.MaskDecision = "system.log.mask" }, "log.decisions.mask_decision: "},
		{"drop path", func(d *Decisions) { d.DropDecision = "/system//drop" }, "log.decisions.drop_decision: "},
		{"token without url", func(d *Decisions) { d.Service.Token = "t" }, "log.decisions.service.token: is set but"},
		{"url scheme", func(d *Decisions) { d.Service.URL = "ftp://logs" }, "log.decisions.service.url: "},
		{"resource", func(d *Decisions) { d.Service.URL = "https://l"; d.Service.Resource = "logs" }, "log.decisions.service.resource: "},
		{"buffer", func(d *Decisions) { d.Service.URL = "https://l"; d.Service.BufferBytes = 10 }, "log.decisions.service.buffer_bytes: "},
		{"min delay", func(d *Decisions) { d.Service.URL = "https://l"; d.Service.MinDelay = Duration(time.Millisecond) }, "log.decisions.service.min_delay: "},
		{"max delay", func(d *Decisions) { d.Service.URL = "https://l"; d.Service.MaxDelay = Duration(time.Second) }, "log.decisions.service.max_delay: "},
		// A token, or a password in the URL, in clear off this host.
		{"token over http", func(d *Decisions) { d.Service.URL = "http://logs.example.com/v1"; d.Service.Token = "t" }, "log.decisions.service.url: is http:// to a host off loopback"},
		{"password over http", func(d *Decisions) { d.Service.URL = "http://u:pw@logs.example.com/v1" }, "log.decisions.service.url: is http:// to a host off loopback"},
		{"query over http", func(d *Decisions) { d.Service.URL = "http://logs.example.com/v1?api_key=k" }, "log.decisions.service.url: is http:// to a host off loopback"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c.Log.Decisions)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
	for _, ok := range []struct{ url, token string }{
		{"https://logs.example.com", ""},
		{"https://logs.example.com", "t"},
		{"http://127.0.0.1:8181", "t"},  // a local agent
		{"http://[::1]:8181", "t"},      // a local agent
		{"http://localhost:8181", "t"},  // a local agent
		{"http://logs.example.com", ""}, // nothing secret but the events
	} {
		c := validConfig()
		c.Log.Decisions.Service.URL, c.Log.Decisions.Service.Token = ok.url, Secret(ok.token)
		if err := c.Validate(); err != nil {
			t.Errorf("a log service at %s (token %v): %v", ok.url, ok.token != "", err)
		}
	}
}
