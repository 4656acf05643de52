package main

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/config"
)

// TestRedisClientSchemes: every scheme the config accepts makes a client
// of the right kind, and the rediss forms keep TLS (a Sentinel URL once
// lost it and sent the password in the clear).
func TestRedisClientSchemes(t *testing.T) {
	cases := []struct {
		url  string
		kind string
		tls  bool
	}{
		{"redis://h:6379/0", "single", false},
		{"rediss://h:6380/0", "single", true},
		{"unix:///run/redis.sock", "single", false},
		{"redis://h:26379/0?master_name=m", "sentinel", false},
		{"rediss://h:26379/0?master_name=m", "sentinel", true},
		{"redis+sentinel://h:26379/0?master_name=m", "sentinel", false},
		{"rediss+sentinel://h:26379/0?master_name=m", "sentinel", true},
		{"redis-sentinel://h:26379/0?master_name=m", "sentinel", false},
		{"rediss-sentinel://h:26379/0?master_name=m", "sentinel", true},
		{"redis+cluster://h:7000?addr=h2:7001", "cluster", false},
		{"rediss+cluster://h:7000", "cluster", true},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		c, err := redisClient(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		var kind string
		var tls bool
		switch c := c.(type) {
		case *redis.Client:
			kind, tls = "single", c.Options().TLSConfig != nil
			if c.Options().Addr == "FailoverClient" {
				kind = "sentinel" // go-redis's failover client is a *redis.Client too
			}
		case *redis.ClusterClient:
			kind, tls = "cluster", c.Options().TLSConfig != nil
		}
		_ = c.Close()
		if kind != tc.kind || tls != tc.tls {
			t.Errorf("%s: a %s client, TLS %v; want %s, TLS %v", tc.url, kind, tls, tc.kind, tc.tls)
		}
		scheme, _, _ := strings.Cut(tc.url, "://")
		seen[scheme] = true
	}
	for _, s := range config.RedisSchemes {
		if !seen[s] {
			t.Errorf("the config accepts %s://, which this test does not try", s)
		}
	}
}
