package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestSpellingLongTargets: a target that may hold a percent-escape is
// decoded only up to maxDecodedLen bytes (decoding costs some seventeen
// bytes of allocation per byte and pass); a longer one is refused, and in
// a tool built without the check it is an opaque target that escapes. The
// refusal quotes the value cut short.
func TestSpellingLongTargets(t *testing.T) {
	long := strings.Repeat("%252525252525252541", 300) // 5,700 bytes
	err := CheckTargetSpelling(map[string]any{"path": long}, DefaultTargetArgs, FoldNone)
	var se *SpellingError
	if !errors.As(err, &se) || !se.Long {
		t.Fatalf("error %v, want a SpellingError for a long target", err)
	}
	if msg := err.Error(); len(msg) > 2*shownLen || !strings.Contains(msg, "longer than 4096 bytes") {
		t.Fatalf("message of %d bytes: %.300s", len(msg), msg)
	}
	tool := NewToolWith("read_file", map[string]any{"path": long}, DefaultTargetArgs, FoldNone)
	if !tool.TargetEscapes || !slices.ContainsFunc(tool.Targets, func(a TargetArg) bool { return a.Opaque }) {
		t.Fatalf("a long encoded target: escapes %v, targets %+v", tool.TargetEscapes, len(tool.Targets))
	}
	// At the bound it is still decoded and judged.
	ok := "docs/" + strings.Repeat("a", maxDecodedLen-len("docs/")-3) + "%20"
	if err := CheckTargetSpelling(map[string]any{"path": ok}, DefaultTargetArgs, FoldNone); err != nil {
		t.Fatalf("a %d-byte target: %v", len(ok), err)
	}
	// No percent sign: any length passes this check.
	if err := CheckTargetSpelling(map[string]any{"path": strings.Repeat("a/", 1<<19)}, DefaultTargetArgs, FoldNone); err != nil {
		t.Fatal(err)
	}
}

// TestSpellingBudget: the targets a call's check decodes are bounded in
// all, not only one by one: 250 targets just under maxDecodedLen, each
// encoded eight deep, cost some 450 MB a call before.
func TestSpellingBudget(t *testing.T) {
	one := strings.Repeat("a", 3900) + "%2525252525252541"
	many := make([]any, 250)
	for i := range many {
		many[i] = one
	}
	err := CheckTargetSpelling(map[string]any{"path": many}, DefaultTargetArgs, FoldNone)
	var se *SpellingError
	if !errors.As(err, &se) || !se.Total || !strings.Contains(err.Error(), "more than 32768 bytes") {
		t.Fatalf("error %v, want the call's total refused", err)
	}
	// Nested in an object, keys and values alike count.
	obj := map[string]any{}
	for i := range 20 {
		obj[strings.Repeat("k", i)+one] = one
	}
	if err := CheckTargetSpelling(map[string]any{"path": obj}, DefaultTargetArgs, FoldNone); !errors.As(err, &se) || !se.Total {
		t.Fatalf("error %v, want the call's total refused", err)
	}
	// 256 targets of 120 bytes with an escape each fit.
	fit := make([]any, MaxTargets)
	for i := range fit {
		fit[i] = "docs/" + strings.Repeat("r", 112) + "%20"
	}
	if err := CheckTargetSpelling(map[string]any{"path": fit}, DefaultTargetArgs, FoldNone); err != nil {
		t.Fatal(err)
	}
}
