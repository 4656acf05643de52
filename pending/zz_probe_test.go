package pending

import (
	"strings"
	"testing"
	"time"
	"crypto/rand"
)

func TestZZProbe(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{Prefix: "toolgate:" + rand.Text()[:6] + ":"})
	ctx := t.Context()
	const n = 2000
	var last Call
	before := usedMemory(t, rdb)
	for range n {
		c := sampleCall()
		c.Request = []byte(strings.Repeat("r", 200))
		c.AttachKey = "sha256:" + rand.Text() + rand.Text()
		last, _, _ = s.Park(ctx, c, time.Minute)
	}
	after := usedMemory(t, rdb)
	t.Logf("delta/call %d", (after-before)/n)
	for _, k := range []string{s.base + "due", s.base + "state:waiting", s.callKey(last.ID), s.base + "attach:" + last.AttachKey} {
		m, _ := rdb.MemoryUsage(ctx, k, 0).Result()
		t.Logf("%s: %d (per call %d)", k, m, m/n)
	}
	info, _ := rdb.Info(ctx, "memory").Result()
	t.Log(info[:600])
}
