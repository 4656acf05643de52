package strictjson

import (
	"unicode/utf16"
	"unicode/utf8"
)

// plain[c] reports whether byte c stands for itself inside a string: it is
// printable ASCII other than '"' and '\\'. Everything else needs a closer
// look (end of string, escape, control character, multi-byte UTF-8).
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str decodes the string whose opening quote is at data[i]. It returns the
// string, whether it is all ASCII, and the offset just past the closing quote.
// A string without escapes is a substring of d.data and costs nothing; one
// with escapes is unescaped into d.buf and converted.
func (d *decoder) str(i int) (string, bool, int, error) {
	data := d.data
	start := i + 1
	ascii := true
	for j := start; ; {
		for j < len(data) && plain[data[j]] {
			j++
		}
		if j >= len(data) {
			return "", false, j, errorAt(j, reasonUnterminated)
		}
		switch c := data[j]; {
		case c == '"':
			return data[start:j], ascii, j + 1, nil
		case c == '\\':
			return d.strEscaped(start, j, ascii)
		case c < 0x20:
			return "", false, j, errorAt(j, reasonControlChar)
		default:
			n, ok := validRune(data[j:])
			if !ok {
				return "", false, j, errorAt(j, reasonInvalidUTF8)
			}
			ascii = false
			j += n
		}
	}
}

// validRune reports the length of the UTF-8 sequence at the start of p, which
// starts with a byte >= 0x80, and whether it is valid. utf8.DecodeRune already
// refuses overlong forms, surrogates (U+D800–U+DFFF) and values above
// U+10FFFF; a literal U+FFFD decodes with length 3, so (RuneError, 1) means
// invalid.
func validRune(p string) (int, bool) {
	r, n := utf8.DecodeRuneInString(p)
	return n, !(r == utf8.RuneError && n == 1)
}

// strEscaped finishes str for a string with escapes: data[start:j] is already
// known to be plain or valid UTF-8, and data[j] is a backslash.
func (d *decoder) strEscaped(start, j int, ascii bool) (string, bool, int, error) {
	data := d.data
	buf := append(d.buf[:0], data[start:j]...)
	for {
		run := j
		for j < len(data) && plain[data[j]] {
			j++
		}
		buf = append(buf, data[run:j]...)
		if j >= len(data) {
			return "", false, j, errorAt(j, reasonUnterminated)
		}
		switch c := data[j]; {
		case c == '"':
			d.buf = buf
			return string(buf), ascii, j + 1, nil
		case c == '\\':
			if j+1 >= len(data) {
				return "", false, j + 1, errorAt(j+1, reasonUnterminated)
			}
			switch e := data[j+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, n, err := unicodeEscape(data, j)
				if err != nil {
					return "", false, j, err
				}
				if r >= utf8.RuneSelf {
					ascii = false
				}
				buf = utf8.AppendRune(buf, r)
				j += n
				continue
			default:
				return "", false, j, errorAt(j, reasonInvalidEscape)
			}
			j += 2
		case c < 0x20:
			return "", false, j, errorAt(j, reasonControlChar)
		default:
			n, ok := validRune(data[j:])
			if !ok {
				return "", false, j, errorAt(j, reasonInvalidUTF8)
			}
			ascii = false
			buf = append(buf, data[j:j+n]...)
			j += n
		}
	}
}

// unicodeEscape decodes the \uXXXX escape at data[j] (the backslash), joining
// a UTF-16 surrogate pair written as two escapes. It returns the code point
// and the number of bytes consumed (6 or 12). A surrogate that is not the
// high half of a correctly ordered pair is refused: Go turns it into U+FFFD,
// Python keeps it, and Node keeps it in a UTF-16 string, so three upstreams
// would read three different strings.
func unicodeEscape(data string, j int) (rune, int, error) {
	r, ok := hex4(data, j+2)
	if !ok {
		return 0, 0, errorAt(j, reasonInvalidEscape)
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, nil
	}
	if r >= 0xDC00 { // a low half with no high half before it
		return 0, 0, errorAt(j, reasonSurrogate)
	}
	if len(data)-j < 12 || data[j+6] != '\\' || data[j+7] != 'u' {
		return 0, 0, errorAt(j, reasonSurrogate)
	}
	lo, ok := hex4(data, j+8)
	if !ok {
		return 0, 0, errorAt(j+6, reasonInvalidEscape)
	}
	if lo < 0xDC00 || lo > 0xDFFF {
		return 0, 0, errorAt(j, reasonSurrogate)
	}
	return utf16.DecodeRune(r, lo), 12, nil
}

// hex4 decodes the four hex digits at data[i:i+4].
func hex4(data string, i int) (rune, bool) {
	if len(data)-i < 4 {
		return 0, false
	}
	var r rune
	for k := i; k < i+4; k++ {
		c := data[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
