package main

import (
	"math"
	"testing"
)

// TestParseRedisCost: the CPU is user + system in µs, every command of
// commandstats counts (scripts' own included), and EVALSHA, EVAL and
// FCALL are the scripts; an INFO without the CPU fields is an error, not zero.
func TestParseRedisCost(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n" +
		"# Commandstats\r\ncmdstat_evalsha:calls=40,usec=3000,usec_per_call=75.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=2,usec=100,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_fcall:calls=5,usec=200,usec_per_call=40.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zadd:calls=300,usec=400,usec_per_call=1.33,rejected_calls=0,failed_calls=0\r\n"
	c, err := parseRedisCost(info)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.cpuUS-3.75e6) > 1e-6 || c.commands != 347 || c.scripts != 47 {
		t.Errorf("parseRedisCost = %+v, want 3.75e6 µs, 347 commands, 47 scripts", c)
	}
	per := c.per(redisCost{cpuUS: 3.75e6 - 500, commands: 247, scripts: 43}, 4)
	if per.cpuUS != 125 || per.commands != 25 || per.scripts != 1 {
		t.Errorf("per = %+v, want 125 µs, 25 commands, 1 script per call", per)
	}
	if _, err := parseRedisCost("# Commandstats\r\ncmdstat_get:calls=1,usec=1\r\n"); err == nil {
		t.Error("an INFO without used_cpu_user and used_cpu_sys parsed")
	}
}
