package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// runSplit is `toolgate-bench split`: it reads the perf profiles that
// -cpuprofile records and puts each sample in one category by the frames
// on its stack, so that a row and its floor compare part by part (the
// table of docs/performance.md, "Where the excess goes"):
//
//	toolgate-bench split -cpu 63.7,85.4 bare.perf allow.perf
//
// With -cpu (each profile's CPU a call in the unprofiled runs, in order)
// the table is in µs a call, the shares scaled to it: perf's own cost
// falls on every sample alike. Without it, in percent of the samples.
func runSplit(args []string) error {
	fs := flag.NewFlagSet("split", flag.ContinueOnError)
	cpu := fs.String("cpu", "", "comma-separated CPU µs a call of each profile's row, to scale the shares to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		return errors.New("usage: toolgate-bench split [-cpu µs,µs…] PROFILE…")
	}
	var scale []float64
	if *cpu != "" {
		for v := range strings.SplitSeq(*cpu, ",") {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return fmt.Errorf("-cpu: %w", err)
			}
			scale = append(scale, f)
		}
		if len(scale) != len(files) {
			return fmt.Errorf("-cpu gives %d values for %d profiles", len(scale), len(files))
		}
	}
	perf, err := exec.LookPath("perf")
	if err != nil {
		return errors.New("split needs perf (Debian: apt-get install linux-perf)")
	}
	counts := make([]splitCounts, len(files))
	for i, f := range files {
		out, err := exec.Command(perf, "script", "-i", f).Output()
		if err != nil {
			return fmt.Errorf("perf script -i %s: %w", f, err)
		}
		if counts[i], err = splitSamples(bytes.NewReader(out)); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	writeSplit(os.Stdout, files, counts, scale)
	return nil
}

// splitCategories are the parts a call's CPU is split into, each named by
// the frames that mark it. A sample goes to the first category one of its
// frames matches, so the narrower parts of a handler come before the
// handler, and the handler before net/http's server loop around it.
var splitCategories = []struct {
	name string
	re   *regexp.Regexp
}{
	{"handlers: the approvals API", regexp.MustCompile(`approvals\.\(\*Handler\)\.ServeHTTP|bareAsk\)\.approve`)},
	{"handlers: the approved call's re-check", regexp.MustCompile(`\.stillAllowed$`)},
	{"handlers: the approved call's seal check", regexp.MustCompile(`sealer\)\.sealed$`)},
	{"handlers: the approved call's finish", regexp.MustCompile(`Lifecycle\)\.finish$`)},
	{"handlers: the approved call's forward", regexp.MustCompile(`Lifecycle\)\.run$|proxy\.executor\.Execute$`)},
	{"handlers: build the parked call", regexp.MustCompile(`\.newParked$`)},
	{"handlers: park, announce, hold", regexp.MustCompile(`Lifecycle\)\.Ask$|proxy\.\(\*Server\)\.ask$`)},
	{"handlers: admit (read, authenticate, check)", regexp.MustCompile(`proxy\.\(\*Server\)\.admit$`)},
	{"handlers: decide (policy, grants, log hand-off)", regexp.MustCompile(`proxy\.\(\*Server\)\.decide$`)},
	{"handlers: forward", regexp.MustCompile(`proxy\.\(\*Server\)\.forward$|ReverseProxy\)\.ServeHTTP$`)},
	{"handlers: routing, middleware, the rest", regexp.MustCompile(`serverHandler\.ServeHTTP$`)},
	{"net/http server: read requests, write answers", regexp.MustCompile(`\(\*conn\)\.serve$`)},
	{"net/http client: write and read loops", regexp.MustCompile(`dialConn\.gowrap[23]$`)},
	{"the notifier", regexp.MustCompile(`notify\.New\.gowrap1$|bareAsk\)\.call\.gowrap[12]$`)},
	{"the decision log's worker", regexp.MustCompile(`decisionlog\.New\.gowrap1$|newBatch`)},
	{"garbage collector", regexp.MustCompile(`^runtime\.(gcBgMarkStartWorkers|gcenable)`)},
}

// splitRest is where a sample no category claims goes: the scheduler,
// sysmon, net/http's background reads.
const splitRest = "runtime: scheduler, sysmon, background reads, the rest"

type splitCounts struct {
	n  map[string]int
	of int
}

// splitSamples counts the samples of `perf script` output by category.
// A sample is a header line, then one frame a line (innermost first),
// then a blank line.
func splitSamples(r io.Reader) (splitCounts, error) {
	c := splitCounts{n: map[string]int{}}
	var frames []string
	flush := func() {
		if len(frames) == 0 {
			return
		}
		c.of++
		c.n[splitCategory(frames)]++
		frames = frames[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if sym := frameSymbol(line); sym != "" {
				frames = append(frames, sym)
			}
		default:
			flush() // a header: the previous sample ended without a blank line
		}
	}
	flush()
	if c.of == 0 {
		return c, errors.New("no samples (was it recorded with -g?)")
	}
	return c, sc.Err()
}

// frameSymbol is the function of a frame line ("addr sym+0xoff (dso)").
func frameSymbol(line string) string {
	_, sym, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return ""
	}
	if i := strings.LastIndex(sym, " ("); i >= 0 {
		sym = sym[:i]
	}
	if i := strings.LastIndex(sym, "+0x"); i >= 0 {
		sym = sym[:i]
	}
	return sym
}

func splitCategory(frames []string) string {
	for _, cat := range splitCategories {
		if slices.ContainsFunc(frames, cat.re.MatchString) {
			return cat.name
		}
	}
	return splitRest
}

// writeSplit prints the table: a row per category that any profile has,
// a column per profile.
func writeSplit(w io.Writer, files []string, counts []splitCounts, scale []float64) {
	unit := "% of samples"
	if scale != nil {
		unit = "µs a call"
	}
	fmt.Fprintf(w, "| category (%s) | %s |\n|---|", unit, strings.Join(files, " | "))
	fmt.Fprint(w, strings.Repeat("---|", len(files)), "\n")
	names := make([]string, 0, len(splitCategories)+1)
	for _, cat := range splitCategories {
		names = append(names, cat.name)
	}
	names = append(names, splitRest)
	cell := func(i, n int) string {
		share := float64(n) / float64(counts[i].of)
		if scale != nil {
			return strconv.FormatFloat(share*scale[i], 'f', 1, 64)
		}
		return strconv.FormatFloat(100*share, 'f', 1, 64)
	}
	for _, name := range names {
		row, seen := "| "+name+" |", false
		for i := range files {
			n := counts[i].n[name]
			seen = seen || n > 0
			if n == 0 {
				row += " |"
				continue
			}
			row += " " + cell(i, n) + " |"
		}
		if seen {
			fmt.Fprintln(w, row)
		}
	}
	var row strings.Builder
	row.WriteString("| total |")
	for i := range files {
		row.WriteString(" " + cell(i, counts[i].of) + " |")
	}
	fmt.Fprintln(w, row.String())
}
