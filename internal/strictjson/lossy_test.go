package strictjson

import (
	"errors"
	"strings"
	"testing"
)

func TestLossyNumbers(t *testing.T) {
	for _, tc := range []struct {
		lit   string
		lossy bool
	}{
		{"0", false},
		{"-0", false},
		{"0.0", false},
		{"0e10", false},
		{"1", false},
		{"-1", false},
		{"1.0", false},
		{"1e2", false},
		{"1E+2", false},
		{"0.1", false},
		{"123456789012345", false},
		{"9007199254740992", false},
		{"9007199254740993", true},
		// Prints back as itself, but the float64 is 122220101234567888.
		{"122220101234567890", true},
		{"-122220101234567890", true},
		{"122220101234567888", true},
		{"1152921504606846976", true}, // 2^60, exact, but it prints back as 1152921504606847000
		{"1.2222010123456789e17", false},
		{"999.99999999999999999", true},
		{"1e400", true},
		{"-1e400", true},
		{"1e-400", true},
		{"0.000e-999", false},
		{"1.7976931348623157e308", false},
		{"5e-324", false},
		{"2.5e-324", true},
		{"0.30000000000000004", false},
		{"0.3000000000000000444", true},
		{"1" + strings.Repeat("0", 120), true}, // too long to judge
	} {
		if got := lossy(tc.lit); got != tc.lossy {
			t.Errorf("lossy(%s) = %v, want %v", tc.lit, got, tc.lossy)
		}
		_, err := Options{RefuseLossyNumbers: true}.Decode([]byte(`{"n":` + tc.lit + `}`))
		var e *Error
		if refused := errors.As(err, &e) && e.Reason == reasonLossyNumber; refused != tc.lossy {
			t.Errorf("Decode(%s) with RefuseLossyNumbers: %v, want refused %v", tc.lit, err, tc.lossy)
		}
		if _, err := Decode([]byte(tc.lit)); err != nil {
			t.Errorf("Decode(%s) without the option: %v, want it accepted", tc.lit, err)
		}
	}
}

func BenchmarkLossy(b *testing.B) {
	for range b.N {
		_ = lossy("0.30000000000000004")
		_ = lossy("12345")
		_ = lossy("1.5")
	}
}
