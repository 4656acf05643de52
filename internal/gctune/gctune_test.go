package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{4 * mib, 32 * mib, 700},  // the next collection at 32 MiB
		{16 * mib, 32 * mib, 100}, // twice live is the floor: the default
		{100 * mib, 32 * mib, 100},
		{1 * mib, 32 * mib, 1000}, // bounded
		{0, 32 * mib, 1000},
	} {
		if got := Percent(c.live, c.floor); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
}

// TestOperatorGOGCWins: with GOGC set, nothing is tuned.
func TestOperatorGOGCWins(t *testing.T) {
	t.Setenv("GOGC", "100")
	if tu := Start(DefaultFloor); tu != nil {
		tu.Stop()
		t.Fatal("tuning started although GOGC is set")
	}
}

// TestTunerFollowsTheLiveHeap: a small live heap gets a raised GOGC, a
// live heap past half the floor gets the default back at the next
// collection, a small one again a raised GOGC, and Stop restores what was
// in force.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	if v, set := os.LookupEnv("GOGC"); set {
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", v) })
	}
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	tu := Start(64 << 20)
	waitPercent := func(ok func(int) bool, what string) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
			runtime.GC()
			if p := tu.Percent(); ok(p) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("GOGC %d, want %s", tu.Percent(), what)
	}
	waitPercent(func(p int) bool { return p > 100 }, "raised for a small heap")
	ballast := make([]byte, 48<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	waitPercent(func(p int) bool { return p == 100 }, "the default for a 48 MiB live heap")
	runtime.KeepAlive(ballast)
	ballast = nil
	// Still following, collection after collection.
	waitPercent(func(p int) bool { return p > 100 }, "raised again once the heap is small")
	tu.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop GOGC is %d, want the 100 in force before", got)
	}
}
