package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// On a shared virtual machine the hypervisor gives some of a core's time
// to other guests ("steal" in /proc/stat). The servers' CPU times do not
// count it, but their calls wait through it, and their caches come back
// cold: a run with much of it reads slower and costlier for reasons
// outside the servers. Each run reports the share of the servers' core
// stolen while it ran, so that such runs can be told apart.

// cpuTicks is one CPU's line of /proc/stat: its ticks in all and those
// stolen.
type cpuTicks struct{ total, steal uint64 }

// readTicks reads cpu's ticks ("1" for cpu1, "" for all CPUs together).
func readTicks(cpu string) (cpuTicks, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	defer f.Close()
	return parseTicks(bufio.NewScanner(f), cpu)
}

// parseTicks finds cpu's line: "cpuN user nice system idle iowait irq
// softirq steal guest guest_nice". guest and guest_nice are counted in
// user and nice already, so the total leaves them out.
func parseTicks(sc *bufio.Scanner, cpu string) (cpuTicks, error) {
	name := "cpu" + cpu
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 9 || fields[0] != name {
			continue
		}
		var t cpuTicks
		for i, f := range fields[1:min(len(fields), 9)] {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return cpuTicks{}, fmt.Errorf("/proc/stat %s: %w", name, err)
			}
			t.total += n
			if i == 7 {
				t.steal = n
			}
		}
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return cpuTicks{}, err
	}
	return cpuTicks{}, fmt.Errorf("/proc/stat: no %s line", name)
}

// stolen is the share of the ticks between a and b that were stolen, or
// -1 when it cannot be told.
func stolen(a, b cpuTicks, errA, errB error) float64 {
	if errA != nil || errB != nil || b.total <= a.total {
		return -1
	}
	return float64(b.steal-a.steal) / float64(b.total-a.total)
}

// stealNote describes the steal of a set of runs, for the report: empty
// when it could not be read.
func stealNote(smps []*sample) string {
	var xs []float64
	for _, s := range smps {
		if s.steal >= 0 {
			xs = append(xs, s.steal)
		}
	}
	if len(xs) == 0 {
		return ""
	}
	hi := xs[0]
	for _, x := range xs {
		hi = max(hi, x)
	}
	note := fmt.Sprintf("Time stolen from the servers' core by the hypervisor during these runs: median %.1f%%, max %.1f%%.", 100*median(xs), 100*hi)
	if hi > stealWarn {
		note += fmt.Sprintf(" Runs above %.0f%% read slower and costlier for reasons outside the servers: compare rows within runs taken close together.", 100*stealWarn)
	}
	return note
}

// stealWarn is the steal above which the report warns.
const stealWarn = 0.05

// stealText is a run's steal for its progress line.
func stealText(s float64) string {
	if s < 0 {
		return ""
	}
	return fmt.Sprintf("steal %4.1f%%", 100*s)
}
