package proxy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// overrideField is the form field, query name or JSON member that some
// frameworks take as the request's method: Rack's MethodOverride (on in
// Rails) and Laravel read it from a form, Hono's methodOverride from a form
// by default, Express's method-override from wherever its getter looks.
// POST /purge with _method=DELETE then runs DELETE /purge, which the
// policy judged as a POST. The header spellings are stripped
// (overrideHeaders); a field in the query or the body cannot be, so it is
// refused.
const overrideField = "_method"

// checkOverrideQuery refuses a query that names overrideField, in any case
// and under any root qs binds it to ("_method[]", "[_method]").
func checkOverrideQuery(q url.Values) *answer {
	for name := range q {
		root, _ := queryRoot(name)
		php, _ := phpRoot(name) // PHP binds ".method" as _method
		if strings.EqualFold(strings.TrimSpace(name), overrideField) || strings.TrimSpace(root) == overrideField || php == overrideField {
			return overrideRefused("query string")
		}
	}
	return nil
}

// checkOverrideArgs refuses a tool call whose arguments name overrideField.
func checkOverrideArgs(args map[string]any) *answer {
	for name := range args {
		if strings.EqualFold(name, overrideField) {
			return overrideRefused("arguments")
		}
	}
	return nil
}

// checkOverrideBody refuses a plain HTTP call's body that carries
// overrideField: as a form's or a multipart form's field, when the body
// may be read as a form (its type's first entry, as PHP and Rack cut it at
// ",", is a form, or there is no type, which Rack reads as a form),
// percent-decoded as often as it decodes: a field name that binds as it
// (formNamesOverride), or in a multipart body any mention of it, since
// its parts' headers are parsed too leniently, by too many parsers, to
// read them one way; or as a JSON object's member, whatever the type says
// (a byte order mark, which body-parser drops, skipped).
func checkOverrideBody(h http.Header, body []byte) *answer {
	if len(body) == 0 {
		return nil
	}
	ct := strings.Join(h.Values("Content-Type"), ",")
	if a := checkBodyCharset(ct); a != nil {
		return a
	}
	if formish(ct) {
		if strings.Contains(strings.ToLower(ct), "multipart") {
			// Multipart by any entry: PHP and Rack read the first, a Fetch
			// body reader (undici, Deno, Bun, Workers) the last.
			if bytes.Contains(decodedLower(body), []byte(overrideField)) || multipartNamesOverride(body, multipartBoundary(ct)) {
				return overrideRefused("body")
			}
		}
		// body-parser (iconv-lite) drops a byte order mark before it
		// reads the form.
		if formNamesOverride(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))) {
			return overrideRefused("body")
		}
	}
	if namesOverrideAsJSON(body) {
		return overrideRefused("body")
	}
	if wide := fromWideUnicode(body); wide != nil && namesOverrideAsJSON(wide) {
		// UTF-16 or UTF-32, which JSON readers that detect the encoding
		// (Jackson) or trust a declared one (body-parser) decode.
		return overrideRefused("body")
	}
	return nil
}

// formNamesOverride reports whether an urlencoded form has a field whose
// name binds as overrideField in some parser: a part's text before "=",
// parts cut at "&" and ";" (Rack 2 and PHP's arg_separator.input cut at
// both) before anything is decoded, as every parser cuts them; the name
// decoded as often as it decodes (decodedLower), cut at a NUL (PHP reads
// it as a C string), its leading whitespace and brackets dropped (PHP
// skips spaces, Rack 2 brackets, qs binds "[_method]" as _method), its
// root up to the next bracket, read as is and as PHP reads it ("." and
// " " as "_": Laravel and Symfony take .method=DELETE as _method). A
// field's value is not looked at: payment_method=card, a value "see
// _method" or an encoded return URL "%2Fp%3F_method%3Ddelete", and a
// nested x[_method] bind to no method override.
func formNamesOverride(body []byte) bool {
	for part := range bytes.FieldsFuncSeq(body, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := bytes.Cut(part, []byte("="))
		if nameBindsAsOverride(decodedLower(name)) {
			return true
		}
	}
	return false
}

// nameBindsAsOverride reports whether a lower-cased field name binds as
// overrideField (formNamesOverride).
func nameBindsAsOverride(name []byte) bool {
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	name = bytes.TrimLeft(name, asciiSpace+"[]")
	if i := bytes.IndexAny(name, "[]"); i >= 0 {
		name = name[:i]
	}
	root := string(bytes.TrimRight(name, asciiSpace))
	return root == overrideField || phpUnderscore.Replace(root) == overrideField
}

// multipartNamesOverride reports whether a multipart body, read as PHP
// reads its parts' headers (main/rfc1867.c), names a field that PHP
// registers as overrideField: a name= pair of any header, whose value, its
// leading whitespace dropped and "." and " " read as "_", starts with
// overrideField. As PHP reads them: the body is not percent-decoded; a part's
// headers are the lines after a delimiter line ("--...") up to the first
// empty one, with no delimiter looked for among them; a line ends at LF
// (one CR before it dropped) and at its first NUL (PHP reads it as a C
// string); a line that starts with a space or tab, or has no ":",
// continues the header before it, joined with nothing between; a line of
// the preamble or of headers longer than PHP takes whole is refused. A line that starts with "--" in a part's content is
// read as a delimiter too, which can only refuse more. A name such as
// payment.method, or a file named notes.method, is not refused.
func multipartNamesOverride(body, boundary []byte) bool {
	delimiter := append([]byte("--"), bytes.ToLower(boundary)...)
	var headers [][]byte
	// preamble: before the first delimiter of boundary's; real: in the
	// headers after one. Only there are long lines refused: a line of a
	// part's content that merely starts with "--" (an SQL comment, YAML's
	// ---) is no delimiter to PHP.
	inHeaders, preamble, real := false, true, false
	for line := range bytes.SplitSeq(bytes.ToLower(body), []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if (preamble || inHeaders && real) && len(line) > phpLineBytes {
			// PHP cuts such a line into several, which could be a
			// delimiter and headers this reading does not see: refused.
			return true
		}
		if i := bytes.IndexByte(line, 0); i >= 0 {
			line = line[:i]
		}
		switch {
		case !inHeaders && bytes.HasPrefix(line, []byte("--")):
			// Without a boundary read, every such line counts as one.
			real = len(boundary) == 0 || bytes.HasPrefix(line, delimiter)
			inHeaders, headers = true, headers[:0]
			preamble = preamble && !real
		case inHeaders && len(line) == 0:
			if headersNameOverride(headers) {
				return true
			}
			inHeaders = false
		case inHeaders && len(headers) > 0 && (line[0] == ' ' || line[0] == '\t' || bytes.IndexByte(line, ':') < 0):
			// A folded line (even one with ":"), or one without ":",
			// continues the header before it.
			headers[len(headers)-1] = append(headers[len(headers)-1], line...)
		case inHeaders:
			headers = append(headers, append([]byte(nil), line...))
		}
	}
	return inHeaders && headersNameOverride(headers)
}

// multipartBoundary is the boundary parameter of a Content-Type as PHP
// reads it (main/rfc1867.c): after "boundary=", quoted, or up to "," or
// ";"; nil when there is none (PHP then parses no part).
func multipartBoundary(ct string) []byte {
	i := strings.Index(strings.ToLower(ct), "boundary=")
	if i < 0 {
		return nil
	}
	v := ct[i+len("boundary="):]
	if rest, ok := strings.CutPrefix(v, `"`); ok {
		v, _, _ = strings.Cut(rest, `"`)
	} else if j := strings.IndexAny(v, ",;"); j >= 0 {
		v = v[:j]
	}
	return []byte(v)
}

// phpLineBytes is the longest line PHP's multipart reader takes whole (its
// buffer, for boundaries up to 5114 bytes); it cuts a longer one.
const phpLineBytes = 5120

// headersNameOverride reports whether a part's headers hold a name= pair
// (in the value after ":", pairs cut at ";" outside quotes) that PHP would
// register as overrideField.
func headersNameOverride(headers [][]byte) bool {
	for _, h := range headers {
		_, value, _ := bytes.Cut(h, []byte(":"))
		for _, pair := range splitOutsideQuotes(value) {
			key, v, ok := bytes.Cut(pair, []byte("="))
			if !ok || string(bytes.Trim(key, asciiSpace)) != "name" {
				continue
			}
			v = bytes.Trim(v, asciiSpace)
			if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
				v = bytes.Trim(v, string(v[:1]))
			}
			// PHP drops leading spaces; any leading whitespace, here.
			name := phpUnderscore.Replace(strings.TrimLeft(string(v), asciiSpace))
			if strings.HasPrefix(name, overrideField) {
				return true
			}
		}
	}
	return false
}

// splitOutsideQuotes cuts a header value at each ";" outside double or
// single quotes, in which a backslash escapes the next byte (as PHP's
// php_ap_getword reads them).
func splitOutsideQuotes(v []byte) [][]byte {
	var parts [][]byte
	var quote byte
	start, escaped := 0, false
	for i, c := range v {
		switch {
		case escaped:
			escaped = false
		case quote != 0 && c == '\\':
			escaped = true
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == ';':
			parts, start = append(parts, v[start:i]), i+1
		}
	}
	return append(parts, v[start:])
}

// asciiSpace is what C's isspace reads as space, which PHP skips.
const asciiSpace = " \t\n\v\f\r"

// namesOverrideAsJSON reports whether body, read as a JSON object, has a
// member named overrideField: parsed where encoding/json parses it (JSON
// escapes: "\u005fmethod"; a byte order mark, which body-parser drops,
// skipped), and otherwise (nesting deeper than encoding/json goes, which
// V8's JSON.parse reads) any mention of the name once escapes are read.
func namesOverrideAsJSON(body []byte) bool {
	js := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(js) == 0 || js[0] != '{' {
		return false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(js, &obj) != nil {
		return bytes.Contains(unescapedLower(js), []byte(overrideField))
	}
	for name := range obj {
		if strings.EqualFold(name, overrideField) {
			return true
		}
	}
	return false
}

// unescapedLower is b lower-cased with every JSON \uXXXX escape of an
// ASCII character read as that character.
func unescapedLower(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' {
			if v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16); err == nil && v < 0x80 {
				out = append(out, byte(v))
				i += 5
				continue
			}
		}
		out = append(out, b[i])
	}
	return bytes.ToLower(out)
}

// fromWideUnicode returns body in UTF-8 when it is UTF-16 or UTF-32 by its
// byte order mark or, as RFC 4627 detects JSON's, by the zero bytes of its
// first four; else nil.
func fromWideUnicode(body []byte) []byte {
	if len(body) < 4 {
		return nil
	}
	b0, b1, b2, b3 := body[0], body[1], body[2], body[3]
	var out []byte
	switch {
	case b0 == 0 && b1 == 0 && (b2 != 0 || b3 != 0), b0 != 0 && b1 == 0 && b2 == 0 && b3 == 0, b0 == 0xff && b1 == 0xfe && b2 == 0 && b3 == 0:
		order := byteOrder(b0 == 0)
		out = make([]byte, 0, len(body)/4)
		for i := 0; i+4 <= len(body); i += 4 {
			// A value past utf8.MaxRune (or negative as a rune) is
			// written as U+FFFD, as string([]rune) writes it.
			out = utf8.AppendRune(out, rune(order.Uint32(body[i:])))
		}
	case b0 == 0 || b1 == 0 || b0 == 0xfe && b1 == 0xff || b0 == 0xff && b1 == 0xfe:
		order := byteOrder(b0 == 0 || b0 == 0xfe)
		out = make([]byte, 0, len(body)/2)
		for i := 0; i+2 <= len(body); i += 2 {
			r := rune(order.Uint16(body[i:]))
			if utf16.IsSurrogate(r) {
				// A pair is one character; a surrogate without its other
				// half is U+FFFD and leaves the next unit to itself, as
				// utf16.Decode reads them.
				pair := utf8.RuneError
				if i+4 <= len(body) {
					pair = utf16.DecodeRune(r, rune(order.Uint16(body[i+2:])))
				}
				if r = pair; r != utf8.RuneError {
					i += 2
				}
			}
			out = utf8.AppendRune(out, r)
		}
	default:
		return nil
	}
	return bytes.TrimPrefix(out, []byte("\xef\xbb\xbf"))
}

// byteOrder is big-endian's or little-endian's.
func byteOrder(big bool) binary.ByteOrder {
	if big {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// checkBodyCharset refuses what a plain HTTP call's Content-Type ct could
// make an upstream decode its body by, other than what toolgate reads it
// as: an RFC 2231 parameter ("charset*=", which Go's mime package lets
// stand for the plain charset while upstreams read the plain one), two
// charsets, and, for a type read as JSON or as a form, a charset but UTF-8
// or a single-byte superset of ASCII (UTF-7 or UTF-16 spell overrideField
// in bytes no scan here reads; Latin-1, which Apache HttpClient declares
// for forms, spells it as ASCII does); for any other type, those or a
// multi-byte charset that keeps ASCII as it is (asciiCompatible).
func checkBodyCharset(ct string) *answer {
	var charsets []string
	for part := range strings.FieldsFuncSeq(ct, func(r rune) bool { return r == ';' || r == ',' }) {
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if strings.Contains(name, "*") {
			return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a Content-Type parameter in the RFC 2231 form ("+name+") is refused: upstreams read the plain one")
		}
		if name == "charset" {
			charsets = append(charsets, strings.ToLower(strings.Trim(strings.TrimSpace(value), `"`)))
		}
	}
	switch {
	case len(charsets) > 1:
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a Content-Type names one charset at most")
	case len(charsets) == 1 && (formish(ct) || jsonish(ct)) && !asciiSuperset(charsets[0]):
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a JSON or form body is UTF-8, ASCII, ISO-8859 or Windows-125x")
	case len(charsets) == 1 && !asciiSuperset(charsets[0]) && !asciiCompatible[charsets[0]]:
		// Any other type too: the JSON scan reads every plain body, as a
		// reader told to parse any type as JSON (express.json with type
		// "*/*") would, and it decodes the declared charset: UTF-7 spells
		// "_method" as "+AF8-method".
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a plain body's charset spells ASCII as ASCII does: UTF-8, ASCII, ISO-8859, Windows-125x, or a multi-byte charset that keeps ASCII (Shift_JIS, EUC, GBK, Big5)")
	}
	return nil
}

// asciiCompatible are the charsets, beside asciiSupersets, that a body of
// another type than JSON or a form may declare, because the scans read it
// in them: multi-byte charsets in which every ASCII character of the text
// is that ASCII byte (a byte of another character may look like ASCII,
// which can only make the scans refuse more; not ISO-2022-JP, whose escape
// sequences split "_me" from "thod"), and UTF-16 and UTF-32, which
// fromWideUnicode reads by their zero bytes.
var asciiCompatible = map[string]bool{
	"shift_jis": true, "shift-jis": true, "sjis": true, "windows-31j": true, "cp932": true, "ms_kanji": true,
	"euc-jp": true, "euc-kr": true, "ks_c_5601-1987": true,
	"gbk": true, "gb2312": true, "gb18030": true, "cp936": true, "big5": true, "big5-hkscs": true,
	"koi8-r": true, "koi8-u": true,
	"utf-16": true, "utf-16le": true, "utf-16be": true, "utf-32": true, "utf-32le": true, "utf-32be": true,
}

// asciiSuperset reports whether cs, a lower-cased charset name, spells
// ASCII as ASCII does, one byte a character: UTF-8, ASCII, and the
// ISO-8859 and Windows-125x charsets, by their names and common aliases.
func asciiSuperset(cs string) bool { return asciiSupersets[cs] }

var asciiSupersets = func() map[string]bool {
	m := map[string]bool{
		"utf-8": true, "utf8": true, "us-ascii": true, "ascii": true,
		"latin1": true, "l1": true, "iso_8859-1": true, "cp819": true, "ibm819": true, "x-cp1252": true,
		"windows-874": true, "cp874": true,
		"binary": true, // what file --mime prints; iconv-lite reads it as Latin-1
	}
	for _, n := range []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "13", "14", "15", "16"} {
		m["iso-8859-"+n], m["iso8859-"+n] = true, true
	}
	for n := range 9 {
		m["windows-125"+strconv.Itoa(n)], m["cp125"+strconv.Itoa(n)] = true, true
	}
	return m
}()

// jsonish reports whether a body of Content-Type ct may be read as JSON.
func jsonish(ct string) bool {
	first := firstMediaType(ct)
	return first == "application/json" || strings.HasSuffix(first, "+json")
}

// formish reports whether a body of Content-Type ct may be read as a form:
// its first entry is nothing (Rack reads no type as a form), or ct names
// "urlencoded" or "multipart" anywhere: a Fetch body reader (undici, Deno,
// Bun, Workers) takes the last entry of a list, PHP and Rack the first,
// and formidable (koa-body) any type that holds either word
// (text/plain; x=urlencoded, application/x-urlencoded).
func formish(ct string) bool {
	lower := strings.ToLower(ct)
	return firstMediaType(ct) == "" || strings.Contains(lower, "urlencoded") || strings.Contains(lower, "multipart")
}

// firstMediaType is the media type of ct's first entry, lower-cased, as
// PHP and Rack cut a Content-Type at ",", ";" and (PHP) a space.
func firstMediaType(ct string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(ct), ",")
	first, _, _ = strings.Cut(first, ";")
	// PHP cuts at a space too (application/x-www-form-urlencoded x is a
	// form to it).
	if i := strings.IndexAny(first, " \t"); i >= 0 {
		first = first[:i]
	}
	return strings.ToLower(first)
}

// decodedLower is b lower-cased with "+" read as a space and every valid
// percent-escape decoded, again while any is left (at most a few rounds).
func decodedLower(b []byte) []byte {
	d := bytes.ToLower(b)
	for range 4 {
		if !bytes.ContainsAny(d, "%+") {
			break
		}
		next := make([]byte, 0, len(d))
		for i := 0; i < len(d); i++ {
			switch c := d[i]; {
			case c == '+':
				next = append(next, ' ')
			case c == '%' && i+2 < len(d):
				h, ok1 := unhex(d[i+1])
				l, ok2 := unhex(d[i+2])
				if ok1 && ok2 {
					next = append(next, h<<4|l)
					i += 2
					continue
				}
				next = append(next, c)
			default:
				next = append(next, c)
			}
		}
		if bytes.Equal(next, d) {
			break
		}
		d = bytes.ToLower(next)
	}
	return d
}

func overrideRefused(where string) *answer {
	return invalid(http.StatusBadRequest, "Method override", "the "+where+" names "+overrideField+", which some frameworks take as the request's method: send the request with its own method")
}
