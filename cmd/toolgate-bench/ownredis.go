package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
)

// ownRedis is the -redis value that has the run start a Redis of its own.
const ownRedis = "own"

// startOwnRedis starts the Redis of the ask (Redis) rows: a redis-server
// of the run's own, without persistence, on the load generator's core,
// beside the approver. The store stands for a server of its own, as it is
// deployed, not for a share of the core the servers are measured on: with
// a Redis the kernel was free to place, toolgate's CPU per Redis ask read
// 530 µs in the runs where Redis landed on the load core and 650–1100 µs
// where it landed on the servers' core, and the row's ratio moved with it.
// Without redis-server the rows are left out, with a warning, and the
// address is empty.
func startOwnRedis(ctx context.Context, dir, cpu string, stderr io.Writer) (string, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(stderr, "warning: redis-server not found (Debian: apt-get install redis-server): the ask (Redis) rows are left out; -redis ADDR uses a Redis that runs")
		return "", nil
	}
	nodes, err := startRedis(ctx, dir, cpu, false, nil)
	if err != nil {
		return "", err
	}
	return nodes[0], nil
}

// redisWhere says, in the run's first line, which Redis the ask (Redis)
// rows use.
func (o *options) redisWhere() string {
	switch {
	case o.redis == "":
		return "no Redis rows"
	case o.redisOwn:
		return "Redis of the run's own on the load core"
	default:
		return "Redis at " + o.redis + ", unpinned"
	}
}
