package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSplitSamples: each sample of `perf script` output goes to the first
// category one of its frames names (the narrower part of a handler before
// the handler), the rest to the runtime's line; the table scales shares
// to the CPU given.
func TestSplitSamples(t *testing.T) {
	sample := func(frames ...string) string {
		var b strings.Builder
		b.WriteString("toolgate 1 1.0: 1001001 cpu-clock:ppp:\n")
		for _, f := range frames {
			b.WriteString("\t  4a1b2c " + f + "+0x1f (/usr/bin/toolgate)\n")
		}
		return b.String() + "\n"
	}
	out := sample("crypto/sha256.block", "github.com/toolgate/toolgate/proxy.(*sealer).sealed", "github.com/toolgate/toolgate/lifecycle.(*Lifecycle).run", "net/http.serverHandler.ServeHTTP", "net/http.(*conn).serve") +
		sample("syscall.Syscall", "net/http.(*conn).serve") +
		sample("runtime.futex", "runtime.mcall") +
		// A header straight after another sample's last frame.
		"toolgate 1 1.0: 1001001 cpu-clock:ppp:\n\t  4a1b2c github.com/toolgate/toolgate/proxy.(*Server).admit+0x1 (/x)\n" +
		sample("net/http.(*Transport).dialConn.gowrap3")
	c, err := splitSamples(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"handlers: the approved call's seal check":      1,
		"net/http server: read requests, write answers": 1,
		splitRest: 1,
		"handlers: admit (read, authenticate, check)": 1,
		"net/http client: write and read loops":       1,
	}
	if c.of != 5 || len(c.n) != len(want) {
		t.Fatalf("split %v of %d, want %v of 5", c.n, c.of, want)
	}
	for k, v := range want {
		if c.n[k] != v {
			t.Errorf("%s: %d, want %d", k, c.n[k], v)
		}
	}
	var b bytes.Buffer
	writeSplit(&b, []string{"a.perf"}, []splitCounts{c}, []float64{50})
	if !strings.Contains(b.String(), "| handlers: admit (read, authenticate, check) | 10.0 |") || !strings.Contains(b.String(), "| total | 50.0 |") {
		t.Errorf("table:\n%s", b.String())
	}
	if _, err := splitSamples(strings.NewReader("")); err == nil {
		t.Error("no samples: no error")
	}
}
