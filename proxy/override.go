package proxy

import (
	"bytes"
	"encoding/json"
	"mime"
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

// checkOverrideQuery refuses a query that names overrideField, in any case.
func checkOverrideQuery(q url.Values) *answer {
	for name := range q {
		if strings.EqualFold(strings.TrimSpace(name), overrideField) {
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
// overrideField: a form's or a multipart form's field (any mention of the
// name, escaped or not: a form is parsed too leniently, by too many
// parsers, to read it one way), or a JSON object's member.
func checkOverrideBody(h http.Header, body []byte) *answer {
	if len(body) == 0 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case mt == "application/x-www-form-urlencoded" || strings.HasPrefix(mt, "multipart/"):
		lower := bytes.ToLower(body)
		if bytes.Contains(lower, []byte(overrideField)) || bytes.Contains(lower, []byte("%5fmethod")) {
			return overrideRefused("body")
		}
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) == nil {
			for name := range obj {
				if strings.EqualFold(name, overrideField) {
					return overrideRefused("body")
				}
			}
		}
	}
	return nil
}

func overrideRefused(where string) *answer {
	return invalid(http.StatusBadRequest, "Method override", "the "+where+" names "+overrideField+", which some frameworks take as the request's method: send the request with its own method")
}
