package main

import (
	"bufio"
	"strings"
	"testing"
)

const procStat = `cpu  400 0 200 1000 10 0 5 40 0 0
cpu0 200 0 100 500 5 0 3 20 0 0
cpu1 200 0 100 500 5 0 2 20 7 0
intr 12345
`

func TestParseTicks(t *testing.T) {
	for _, tc := range []struct {
		cpu         string
		total, stel uint64
	}{
		{"", 1655, 40},
		{"0", 828, 20},
		{"1", 827, 20}, // guest (7) is in user already
	} {
		got, err := parseTicks(bufio.NewScanner(strings.NewReader(procStat)), tc.cpu)
		if err != nil || got.total != tc.total || got.steal != tc.stel {
			t.Errorf("cpu%q: %+v, %v; want total %d steal %d", tc.cpu, got, err, tc.total, tc.stel)
		}
	}
	if _, err := parseTicks(bufio.NewScanner(strings.NewReader(procStat)), "7"); err == nil {
		t.Error("cpu7: no error for a missing line")
	}
}

func TestStealNote(t *testing.T) {
	a, b := cpuTicks{total: 1000, steal: 10}, cpuTicks{total: 1400, steal: 50}
	if s := stolen(a, b, nil, nil); s != 0.1 {
		t.Errorf("stolen = %v, want 0.1", s)
	}
	if s := stolen(b, a, nil, nil); s != -1 {
		t.Errorf("stolen backwards = %v, want -1", s)
	}
	quiet := []*sample{{steal: 0.01}, {steal: 0.02}, {steal: -1}}
	if n := stealNote(quiet); !strings.Contains(n, "median 1.5%, max 2.0%") || strings.Contains(n, "Runs above") {
		t.Errorf("quiet runs: %q", n)
	}
	if n := stealNote(append(quiet, &sample{steal: 0.2})); !strings.Contains(n, "max 20.0%") || !strings.Contains(n, "Runs above 5%") {
		t.Errorf("a noisy run: %q", n)
	}
	if n := stealNote([]*sample{{steal: -1}}); n != "" {
		t.Errorf("unknown steal: %q", n)
	}
}
