package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		name    string
		in      any
		want    time.Duration
		wantErr bool
	}{
		{"seconds", "25s", 25 * time.Second, false},
		{"hours and minutes", "1h30m", 90 * time.Minute, false},
		{"milliseconds", "500ms", 500 * time.Millisecond, false},
		{"bare number string is seconds", "25", 25 * time.Second, false},
		{"zero", "0", 0, false},
		{"spaces trimmed", " 5m ", 5 * time.Minute, false},
		{"negative", "-5s", -5 * time.Second, false},
		{"yaml integer is seconds", 25, 25 * time.Second, false},
		{"uint64 is seconds", uint64(3), 3 * time.Second, false},
		{"whole float is seconds", 60.0, time.Minute, false},
		{"time.Duration from a flag", 2 * time.Minute, 2 * time.Minute, false},
		{"Duration as is", Duration(time.Hour), time.Hour, false},
		{"days are not a Go unit", "1d", 0, true},
		{"words", "25 seconds", 0, true},
		{"empty", "", 0, true},
		{"fractional float", 1.5, 0, true},
		{"bool", true, 0, true},
		{"list", []any{"1s"}, 0, true},
		{"seconds overflow", "99999999999999", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := durationFrom(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("durationFrom(%#v) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err == nil && got.Std() != tt.want {
				t.Errorf("durationFrom(%#v) = %v, want %v", tt.in, got.Std(), tt.want)
			}
		})
	}
}

func TestDurationString(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{25 * time.Second, "25s"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{24 * time.Hour, "24h"},
		{time.Hour + 5*time.Second, "1h5s"},
		{500 * time.Millisecond, "500ms"},
		{1500 * time.Millisecond, "1.5s"},
		{-5 * time.Second, "-5s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			d := Duration(tt.in)
			if got := d.String(); got != tt.want {
				t.Errorf("Duration(%d).String() = %q, want %q", tt.in, got, tt.want)
			}
			var back Duration
			if err := back.UnmarshalText([]byte(d.String())); err != nil || back != d {
				t.Errorf("round trip of %q = %v, %v; want %v", d.String(), back, err, d)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		name    string
		in      any
		want    int64
		wantErr bool
	}{
		{"MiB", "1MiB", 1 << 20, false},
		{"KiB", "512KiB", 512 << 10, false},
		{"kB is decimal", "64kB", 64000, false},
		{"MB is decimal", "10MB", 10_000_000, false},
		{"GiB with a space", "1 GiB", 1 << 30, false},
		{"units ignore case", "2mib", 2 << 20, false},
		{"bytes unit", "100B", 100, false},
		{"plain number string", "1048576", 1 << 20, false},
		{"fraction that is whole", "1.5KiB", 1536, false},
		{"zero", "0", 0, false},
		{"yaml integer", 4096, 4096, false},
		{"yaml float", 1e6, 1_000_000, false},
		{"single letter is ambiguous", "1M", 0, true},
		{"unknown unit", "1PB", 0, true},
		{"negative string", "-1", 0, true},
		{"negative number", -1, 0, true},
		{"fraction of a byte", "1.5B", 0, true},
		{"two dots", "1..5KiB", 0, true},
		{"no number", "MiB", 0, true},
		{"ratio is not a number", "3/4MiB", 0, true},
		{"exponent is not a number", "1e3", 0, true},
		{"too large", "99999999999TiB", 0, true},
		{"bool", true, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := byteSizeFrom(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("byteSizeFrom(%#v) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err == nil && got.Int64() != tt.want {
				t.Errorf("byteSizeFrom(%#v) = %d, want %d", tt.in, got.Int64(), tt.want)
			}
		})
	}
}

func TestByteSizeString(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0B"},
		{100, "100B"},
		{1 << 10, "1KiB"},
		{1536, "1536B"},
		{1 << 20, "1MiB"},
		{512 << 10, "512KiB"},
		{64000, "64000B"},
		{3 << 30, "3GiB"},
		{1 << 40, "1TiB"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			b := ByteSize(tt.in)
			if got := b.String(); got != tt.want {
				t.Errorf("ByteSize(%d).String() = %q, want %q", tt.in, got, tt.want)
			}
			var back ByteSize
			if err := back.UnmarshalText([]byte(b.String())); err != nil || back != b {
				t.Errorf("round trip of %q = %v, %v; want %v", b.String(), back, err, b)
			}
		})
	}
}

// TestSecretNeverPrints formats a Secret every way a log line or a debug
// print might, and looks for the value.
func TestSecretNeverPrints(t *testing.T) {
	const value = "hunter2-hunter2-hunter2"
	s := Secret(value)
	if s.Reveal() != value {
		t.Fatalf("Reveal() = %q, want %q", s.Reveal(), value)
	}

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "secret", s)
	js, err := json.Marshal(struct{ S Secret }{s})
	if err != nil {
		t.Fatal(err)
	}
	ys, err := yaml.Marshal(map[string]Secret{"s": s})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := s.MarshalText()
	outputs := map[string]string{
		"%v":   fmt.Sprintf("%v", s),
		"%s":   fmt.Sprintf("%s", s), //lint:ignore S1025 formatting with %s is what is under test
		"%q":   fmt.Sprintf("%q", s),
		"%+v":  fmt.Sprintf("%+v", struct{ S Secret }{s}),
		"%#v":  fmt.Sprintf("%#v", s),
		"slog": logged.String(),
		"json": string(js),
		"yaml": string(ys),
		"text": string(text),
	}
	for how, out := range outputs {
		if strings.Contains(out, value) {
			t.Errorf("%s printed the secret: %s", how, out)
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%s = %q, want it to contain [redacted]", how, out)
		}
	}

	var empty Secret
	if empty.String() != "" {
		t.Errorf("empty Secret prints %q, want \"\"", empty.String())
	}
}
