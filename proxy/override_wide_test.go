package proxy

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unicode/utf16"
)

// FuzzFromWideUnicode: the body's UTF-8 is what the standard library's
// decoders make of it (utf16.Decode; a rune per four bytes), whatever the
// bytes: unpaired surrogates, values past U+10FFFF, odd lengths.
func FuzzFromWideUnicode(f *testing.F) {
	for _, seed := range []string{
		"\xff\xfe{\x00\"\x00_\x00", "\x00{\x00\"", "{\x00\x00\x00\"\x00\x00\x00",
		"\x00\x00\x00{\x00\x00\x00\"", "\xff\xfe\x00\x00{\x00\x00\x00",
		"\xfe\xff\xd8\x3d\xde\x00", "\xff\xfe\x3d\xd8\x3d\xd8{\x00", "\x00\x00\xff\xff\xff\xff\xff\xff",
		"\xff\xfe\x00\xdc\x00\xd8", "\xff\xfe\x3d\xd8\x00", "{\"a\":1}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, want := fromWideUnicode(body), wideByRunes(body)
		if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
			t.Fatalf("fromWideUnicode(%q) = %q, want %q", body, got, want)
		}
	})
}

// wideByRunes is fromWideUnicode as a slice of runes makes it.
func wideByRunes(body []byte) []byte {
	if len(body) < 4 {
		return nil
	}
	b0, b1, b2, b3 := body[0], body[1], body[2], body[3]
	var runes []rune
	switch {
	case b0 == 0 && b1 == 0 && (b2 != 0 || b3 != 0), b0 != 0 && b1 == 0 && b2 == 0 && b3 == 0, b0 == 0xff && b1 == 0xfe && b2 == 0 && b3 == 0:
		order := byteOrder(b0 == 0)
		for i := 0; i+4 <= len(body); i += 4 {
			runes = append(runes, rune(order.Uint32(body[i:])))
		}
	case b0 == 0 || b1 == 0 || b0 == 0xfe && b1 == 0xff || b0 == 0xff && b1 == 0xfe:
		var order binary.ByteOrder = binary.LittleEndian
		if b0 == 0 || b0 == 0xfe {
			order = binary.BigEndian
		}
		var units []uint16
		for i := 0; i+2 <= len(body); i += 2 {
			units = append(units, order.Uint16(body[i:]))
		}
		runes = utf16.Decode(units)
	default:
		return nil
	}
	return bytes.TrimPrefix([]byte(string(runes)), []byte("\xef\xbb\xbf"))
}
