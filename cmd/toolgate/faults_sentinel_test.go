package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// sentinelFaults is a Sentinel set under faults: a forced failover
// (SENTINEL FAILOVER), SIGKILL or SIGSTOP of the primary, SIGKILL of the
// replica, a restart of the primary from its AOF, and a restart of the
// primary without its data (its replica follows it empty).
type sentinelFaults struct {
	set *testkit.SentinelSet
	// prober writes to whichever node the sentinels name primary, as
	// toolgate does; minReplicas is the confirmation toolgate waits for.
	prober      *redis.Client
	minReplicas int
}

func newSentinelFaults(t *testing.T, set *testkit.SentinelSet, minReplicas int) *sentinelFaults {
	prober := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: set.Master, SentinelAddrs: set.Sentinels, ContextTimeoutEnabled: true, MaxRetries: -1,
	})
	t.Cleanup(func() { prober.Close() })
	return &sentinelFaults{set: set, prober: prober, minReplicas: minReplicas}
}

// probeWrite writes one key and waits for the replicas toolgate would
// wait for, as long as it would (redis_replica_timeout): it succeeds when a
// toolgate transition could have.
func (f *sentinelFaults) probeWrite(ctx context.Context) error {
	var wait *redis.IntCmd
	_, err := f.prober.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "toolgate-fault-probe", time.Now().UnixNano(), 0)
		if f.minReplicas > 0 {
			wait = redis.NewIntCmd(ctx, "WAIT", f.minReplicas, pending.DefaultReplicaTimeout.Milliseconds())
			_ = p.Process(ctx, wait)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if wait != nil && wait.Val() < int64(f.minReplicas) {
		return fmt.Errorf("confirmed by %d replicas of %d", wait.Val(), f.minReplicas)
	}
	return nil
}

func (f *sentinelFaults) url() string {
	s := f.set
	return "redis+sentinel://" + s.Sentinels[0] + "?master_name=" + s.Master + "&addr=" + s.Sentinels[1] + "&addr=" + s.Sentinels[2]
}

func (f *sentinelFaults) kinds() []string {
	return []string{"sentinel-failover", "primary-kill", "primary-pause", "replica-kill", "primary-restart-aof"}
}

// primary returns the node the sentinels name master now.
func (f *sentinelFaults) primary() *testkit.RedisProc {
	for _, s := range f.set.Sentinels {
		reply := testkit.Do(s, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", f.set.Master)
		for _, n := range f.set.Nodes {
			_, port, _ := net.SplitHostPort(n.Addr)
			if strings.Contains(reply, "\r\n"+port+"\r\n") {
				return n
			}
		}
	}
	return f.set.Nodes[0]
}

func (f *sentinelFaults) other(n *testkit.RedisProc) *testkit.RedisProc {
	if n == f.set.Nodes[0] {
		return f.set.Nodes[1]
	}
	return f.set.Nodes[0]
}

func (f *sentinelFaults) healthy() (bool, string) {
	p := f.primary()
	info := p.Do("INFO", "replication")
	if strings.Contains(info, "role:master") && strings.Contains(info, "state=online") {
		return true, ""
	}
	return false, "primary " + p.Addr + " says " + info
}

func (f *sentinelFaults) inject(_ *faultWorld, kind string) {
	switch kind {
	case "sentinel-failover":
		old := f.primary()
		testkit.Do(f.set.Sentinels[rand.IntN(3)], "SENTINEL", "FAILOVER", f.set.Master)
		f.waitPrimary(func(p *testkit.RedisProc) bool { return p != old })
	case "primary-kill":
		old := f.primary()
		old.Kill()
		f.waitPrimary(func(p *testkit.RedisProc) bool { return p != old })
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
		old.Start()
	case "primary-pause":
		// Longer than the sentinels' down-after: they may fail over while
		// the old primary still believes it is one.
		p := f.primary()
		p.Pause()
		time.Sleep(time.Duration(500+rand.IntN(2000)) * time.Millisecond)
		p.Resume()
	case "replica-kill":
		r := f.other(f.primary())
		r.Kill()
		time.Sleep(time.Duration(200+rand.IntN(1000)) * time.Millisecond)
		r.Start()
	case "primary-restart-aof":
		p := f.primary()
		p.Kill()
		p.Start()
	case "redis-restart-empty":
		// The primary restarts without its data, as a Redis without
		// persistence does, and its replica follows it empty: what was
		// parked is gone, and nothing may run twice.
		p := f.primary()
		p.Kill()
		p.Wipe()
		p.Start()
	}
}

// waitPrimary waits up to 20 s for the sentinels to name a primary that
// satisfies ok.
func (f *sentinelFaults) waitPrimary(ok func(*testkit.RedisProc) bool) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok(f.primary()) {
			return
		}
	}
}

func (f *sentinelFaults) heal() {
	for _, n := range f.set.Nodes {
		n.Resume()
		n.Start()
	}
}
