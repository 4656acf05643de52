package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
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
		if strings.EqualFold(strings.TrimSpace(name), overrideField) || strings.TrimSpace(root) == overrideField {
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
// ",", is a form, or there is no type, which Rack reads as a form): any
// mention of the name once percent-decoded as often as it decodes, since a
// form is parsed too leniently, by too many parsers, to read it one way;
// or as a JSON object's member, whatever the type says (a byte order mark,
// which body-parser drops, skipped).
func checkOverrideBody(h http.Header, body []byte) *answer {
	if len(body) == 0 {
		return nil
	}
	if formish(h.Get("Content-Type")) && bytes.Contains(decodedLower(body), []byte(overrideField)) {
		return overrideRefused("body")
	}
	// JSON escapes: "\u005fmethod".
	js := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(js) > 0 && js[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(js, &obj) == nil {
			for name := range obj {
				if strings.EqualFold(name, overrideField) {
					return overrideRefused("body")
				}
			}
		}
	}
	return nil
}

// formish reports whether a body of Content-Type ct may be read as a form.
func formish(ct string) bool {
	first, _, _ := strings.Cut(ct, ",")
	first, _, _ = strings.Cut(first, ";")
	first = strings.ToLower(strings.TrimSpace(first))
	return first == "" || first == "application/x-www-form-urlencoded" || strings.HasPrefix(first, "multipart/")
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
