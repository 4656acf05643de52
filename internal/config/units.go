package config

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d so that ParseDuration reads it back: "25s", "1h30m",
// "24h", "500ms". Whole hours and minutes are not padded with "0m0s", which
// is what time.Duration.String would print.
func (d Duration) String() string {
	td := time.Duration(d)
	if td <= 0 || td%time.Second != 0 {
		return td.String()
	}
	var b strings.Builder
	if h := td / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh", h)
		td -= h * time.Hour
	}
	if m := td / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dm", m)
		td -= m * time.Minute
	}
	if s := td / time.Second; s > 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseDuration, so a
// Duration also works with flag.TextVar.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDuration reads a duration as time.ParseDuration does ("25s", "1h30m",
// "500ms"), and a bare integer as a number of seconds ("25"), which is what
// people write in environment variables.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return secondsDuration(n)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return Duration(d), nil
}

func secondsDuration(n int64) (Duration, error) {
	if n > math.MaxInt64/int64(time.Second) || n < math.MinInt64/int64(time.Second) {
		return 0, fmt.Errorf("duration of %d seconds is too long", n)
	}
	return Duration(time.Duration(n) * time.Second), nil
}

// durationFrom converts a decoded YAML, environment or flag value to a
// Duration: a string as ParseDuration reads it, an integer as seconds, or a
// time.Duration as is.
func durationFrom(v any) (Duration, error) {
	switch v := v.(type) {
	case Duration:
		return v, nil
	case time.Duration:
		return Duration(v), nil
	case string:
		return ParseDuration(v)
	}
	if n, ok := wholeNumber(v); ok {
		return secondsDuration(n)
	}
	return 0, fmt.Errorf("expected a duration, got %s", describe(v))
}

// Int64 returns b as a number of bytes.
func (b ByteSize) Int64() int64 { return int64(b) }

// iecUnits are the units String prints, largest first.
var iecUnits = []struct {
	name string
	size int64
}{
	{"TiB", 1 << 40},
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
}

// String prints b in the largest IEC unit that divides it exactly ("1MiB",
// "512KiB"), or in bytes ("64000B") when none does, so that ParseByteSize
// reads it back unchanged.
func (b ByteSize) String() string {
	n := int64(b)
	if n > 0 {
		for _, u := range iecUnits {
			if n%u.size == 0 {
				return strconv.FormatInt(n/u.size, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseByteSize.
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// byteUnits maps a lower-cased unit to its size. kB, MB, GB and TB are
// decimal (SI); KiB, MiB, GiB and TiB are binary (IEC). Single letters such
// as "M" are refused because tools disagree on what they mean.
var byteUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
}

// ParseByteSize reads a size: a number of bytes ("1048576"), or a number and
// a unit ("1MiB", "512KiB", "64kB" = 64000, "10MB", "1.5KiB"). Units are
// case-insensitive; the result must be a whole, non-negative number of bytes
// that fits in an int64.
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("invalid size %q", s)
	end := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end < 0 {
		end = len(s)
	}
	num, unit := s[:end], strings.TrimSpace(s[end:])
	// big.Rat.SetString also accepts "3/4" and "1e3"; only plain decimals
	// reach it, because num holds digits and dots only.
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, bad
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	if !ok {
		return 0, bad
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, bad
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(r.Num().Int64()), nil
}

// byteSizeFrom converts a decoded YAML, environment or flag value to a
// ByteSize: a string as ParseByteSize reads it, or a whole number of bytes.
func byteSizeFrom(v any) (ByteSize, error) {
	switch v := v.(type) {
	case ByteSize:
		return v, nil
	case string:
		return ParseByteSize(v)
	}
	if n, ok := wholeNumber(v); ok {
		if n < 0 {
			return 0, fmt.Errorf("size %d is negative", n)
		}
		return ByteSize(n), nil
	}
	return 0, fmt.Errorf("expected a size, got %s", describe(v))
}

// wholeNumber returns v as an int64 when it is an integer of any Go type, or
// a float with no fractional part (YAML reads 1e6 as a float).
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint:
		return int64(n), uint64(n) <= math.MaxInt64
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), n <= math.MaxInt64
	case float32:
		return wholeFloat(float64(n))
	case float64:
		return wholeFloat(n)
	}
	return 0, false
}

func wholeFloat(f float64) (int64, bool) {
	// 0x1p63 is MaxInt64+1, the first float that no longer fits.
	if f != math.Trunc(f) || f >= 0x1p63 || f < -0x1p63 {
		return 0, false
	}
	return int64(f), true
}
