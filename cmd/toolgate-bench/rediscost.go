package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisCost is what Redis itself did for a row's calls: toolgate's CPU is
// only half of an ask kept in Redis, and the half on the Redis server is
// what bounds how many asks one Redis takes.
type redisCost struct {
	cpuUS    float64 // Redis CPU, µs (used_cpu_user + used_cpu_sys)
	commands float64 // commands run, those of scripts included
	scripts  float64 // EVALSHA, EVAL and FCALL: the round trips that run scripts
}

// readRedisCost reads Redis's counters so far.
func readRedisCost(ctx context.Context, rdb *redis.Client) (redisCost, error) {
	info, err := rdb.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return redisCost{}, err
	}
	return parseRedisCost(info)
}

// parseRedisCost reads an INFO reply's cpu and commandstats sections.
func parseRedisCost(info string) (redisCost, error) {
	var c redisCost
	seen := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return c, fmt.Errorf("INFO %s: %w", k, err)
			}
			c.cpuUS += s * 1e6
			seen++
		case strings.HasPrefix(k, "cmdstat_"):
			// calls=N,usec=…
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, err := strconv.ParseFloat(calls, 64)
			if err != nil {
				return c, fmt.Errorf("INFO %s: %w", k, err)
			}
			c.commands += n
			if k == "cmdstat_evalsha" || k == "cmdstat_eval" || k == "cmdstat_fcall" {
				c.scripts += n
			}
		}
	}
	if seen != 2 {
		return c, fmt.Errorf("INFO has no used_cpu_user and used_cpu_sys")
	}
	return c, nil
}

// per is what Redis did between c0 and c per call of n.
func (c redisCost) per(c0 redisCost, n int64) redisCost {
	d := float64(max(n, 1))
	return redisCost{cpuUS: (c.cpuUS - c0.cpuUS) / d, commands: (c.commands - c0.commands) / d, scripts: (c.scripts - c0.scripts) / d}
}
