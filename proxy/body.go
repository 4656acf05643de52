package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
)

// readBody reads the whole request body, at most limit bytes after any
// decoding, and returns the decoded bytes: the bytes the policy evaluates and
// the upstream receives. A body over the limit is refused, never truncated.
// Content-Encoding gzip is decoded; any other encoding is refused, since
// toolgate could not evaluate what the upstream would decode.
func readBody(r *http.Request, limit int64) ([]byte, *answer) {
	enc, err := contentEncoding(r.Header)
	if err != nil {
		return nil, invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Encoding", err.Error())
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body := http.MaxBytesReader(nil, r.Body, limit)
	raw, err := io.ReadAll(body)
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return nil, tooLarge(limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, invalid(http.StatusRequestTimeout, "Body too slow", "the request body did not arrive within limits.body_timeout")
		}
		return nil, invalid(http.StatusBadRequest, "Unreadable body", "the request body could not be read in full")
	}
	if enc == "" {
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid(http.StatusBadRequest, "Bad gzip body", "the gzip body cannot be decoded")
	}
	// Read one byte past the limit to tell "exactly the limit" from "over".
	decoded, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, invalid(http.StatusBadRequest, "Bad gzip body", "the gzip body cannot be decoded")
	}
	if int64(len(decoded)) > limit {
		return nil, tooLarge(limit)
	}
	return decoded, nil
}

func tooLarge(limit int64) *answer {
	return invalid(http.StatusRequestEntityTooLarge, "Body too large", fmt.Sprintf("the request body is larger than %d bytes (limits.max_body_bytes)", limit))
}

// contentEncoding returns "" for no encoding (or identity) and "gzip" for
// gzip; anything else, including stacked encodings, is an error.
func contentEncoding(h http.Header) (string, error) {
	vals := h.Values("Content-Encoding")
	var codings []string
	for _, v := range vals {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return "", nil
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return "gzip", nil
	}
	return "", fmt.Errorf("Content-Encoding %q is not supported (only gzip)", strings.Join(vals, ", "))
}

// checkJSONContentType refuses tool calls whose body is not declared JSON:
// a body the upstream might parse as a form or as text is not what the
// policy would see.
func checkJSONContentType(h http.Header) *answer {
	ct := h.Values("Content-Type")
	if len(ct) != 1 {
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a tool call needs exactly one Content-Type: application/json")
	}
	mt, params, err := mime.ParseMediaType(ct[0])
	if err != nil || mt != "application/json" {
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", fmt.Sprintf("a tool call needs Content-Type application/json, not %q", ct[0]))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a tool call body must be UTF-8")
	}
	return nil
}

// parseArguments decodes a tool call body strictly: invalid JSON, a top
// level that is not an object, duplicate or case-variant keys at any depth
// and invalid UTF-8 are refused rather than read one way by toolgate and
// another by the upstream.
func (s *Server) parseArguments(body []byte) (map[string]any, *answer) {
	args, err := s.json.DecodeObject(body)
	if err != nil {
		return nil, invalid(http.StatusBadRequest, "Bad JSON body", err.Error())
	}
	return args, nil
}
