package main

import (
	"strings"
	"testing"
)

// TestSpread: the target lines give the range of the ratio repetition by
// repetition, pairing the i-th run of one row with the i-th of the other,
// and leave an upstream shown beside an MCP row out of it as the tables do.
func TestSpread(t *testing.T) {
	one := []*proc{{}}
	ask, allow := &target{name: "ask", procs: one}, &target{name: "allow", procs: one}
	a := medians(ask, []*sample{{cpu: []float64{300}}, {cpu: []float64{500}}, {cpu: []float64{400}}})
	b := medians(allow, []*sample{{cpu: []float64{100}}, {cpu: []float64{100}}, {cpu: []float64{200}}})
	if got, want := spread(a, b), " (by repetition 2.00–5.00×)"; got != want {
		t.Errorf("spread = %q, want %q", got, want)
	}
	if got := spread(medians(ask, []*sample{{cpu: []float64{300}}}), medians(allow, []*sample{{cpu: []float64{100}}})); got != "" {
		t.Errorf("one repetition: spread = %q, want none", got)
	}

	two := []*proc{{}, {}}
	tg := &target{name: "MCP toolgate", procs: two, upstreamCPU: true}
	bare := &target{name: "MCP bare proxy", procs: two, upstreamCPU: true}
	m := medians(tg, []*sample{{cpu: []float64{150, 1000}}, {cpu: []float64{120, 1000}}})
	n := medians(bare, []*sample{{cpu: []float64{100, 50}}, {cpu: []float64{100, 50}}})
	if got := spread(m, n); !strings.Contains(got, "1.20–1.50×") {
		t.Errorf("MCP spread = %q, want the servers' CPU alone (1.20–1.50×)", got)
	}
}
