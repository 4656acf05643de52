package strictjson

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// maxJudgedLiteral bounds the literals lossy compares exactly: a longer one
// is called lossy rather than converted, since an exact conversion of a
// megabyte of digits is work an attacker could ask for at will.
const maxJudgedLiteral = 100

// lossy reports whether the JSON number literal lit reads, as a float64, as
// another decimal value than it spells: the shortest decimal that prints
// back from the float64 is compared with lit as an exact rational. An
// integer beyond 2^53 must moreover be the float64's exact value:
// 122220101234567890 prints back as itself, but the float64 is
// 122220101234567888, which a JavaScript upstream's BigInt (or a Go
// int64 of the float) reads, while the policy, OPA and Python read the
// literal.
func lossy(lit string) bool {
	if len(lit) <= 15 && !strings.ContainsAny(lit, ".eE") {
		return false // an integer of at most 15 digits is exact in a float64
	}
	if len(lit) > maxJudgedLiteral {
		return true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return true // beyond float64's range
	}
	back := strconv.FormatFloat(f, 'g', -1, 64)
	if back == lit && (math.Abs(f) <= 1<<53 || !isInteger(lit)) {
		return false
	}
	if f == 0 {
		// Zero, or a value that underflowed to zero: only a literal with
		// no non-zero digit in its mantissa is zero.
		mantissa, _, _ := strings.Cut(strings.ToLower(lit), "e")
		return strings.Trim(mantissa, "-0.") != ""
	}
	var a, b big.Rat
	if _, ok := a.SetString(lit); !ok {
		return true
	}
	if _, ok := b.SetString(back); !ok {
		return true
	}
	if a.Cmp(&b) != 0 {
		return true
	}
	if isInteger(lit) && math.Abs(f) > 1<<53 {
		var exact big.Rat
		exact.SetFloat64(f)
		return a.Cmp(&exact) != 0
	}
	return false
}

// isInteger reports whether the literal has neither a fraction nor an
// exponent: what JavaScript's BigInt and Go's integer types read as an
// integer. A literal with an exponent (1e23) is a float's spelling, and
// judged as one.
func isInteger(lit string) bool { return !strings.ContainsAny(lit, ".eE") }
