package approvals

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/internal/strictjson"
)

// writeAnswer writes a decision's answer as writeJSON would, encoded by
// appendJSON: every decision through the API is answered with one, and
// encoding/json spent most of the answer finding its way through the
// struct by reflection.
func writeAnswer(w http.ResponseWriter, status int, a *decisionAnswer) {
	b, err := a.appendJSON(make([]byte, 0, 256))
	writeJSONBytes(w, status, b, err)
}

// appendJSON appends a as json.Marshal writes it (omitempty, and <, >
// and & escaped, included), field by field. TestDecisionAnswerEncodesAsJSON
// holds both to the same bytes.
func (a *decisionAnswer) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"call_id":`...)
	b = appendHTMLSafeString(b, a.CallID)
	b = append(b, `,"status":`...)
	b = appendHTMLSafeString(b, a.Status)
	b = append(b, `,"decided_by":`...)
	b = appendHTMLSafeString(b, a.DecidedBy)
	if len(a.Approvals) > 0 {
		b = append(b, `,"approvals":[`...)
		for i, ap := range a.Approvals {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"by":`...)
			b = appendHTMLSafeString(b, ap.By)
			b = append(b, `,"at":`...)
			b = appendHTMLSafeString(b, ap.At)
			b = append(b, `,"comment":`...)
			b = appendHTMLSafeString(b, ap.Comment)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if a.Progress != "" {
		b = append(b, `,"progress":`...)
		b = appendHTMLSafeString(b, a.Progress)
	}
	if a.Grant != nil {
		// Rare (an "approve and remember"): encoding/json's own.
		g, err := json.Marshal(a.Grant)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"grant":`...)
		b = append(b, g...)
	}
	if a.Error != "" {
		b = append(b, `,"error":`...)
		b = appendHTMLSafeString(b, a.Error)
	}
	return append(b, '}'), nil
}

// appendHTMLSafeString appends s as a JSON string as encoding/json writes
// it by default: as strictjson writes it, with <, > and & escaped.
func appendHTMLSafeString(b []byte, s string) []byte {
	start := len(b)
	b = strictjson.AppendString(b, s)
	if !strings.ContainsAny(s, "<>&") {
		return b
	}
	// strictjson writes these three as they are, never as part of an
	// escape, so each one in its output is one of s's.
	quoted := string(b[start:])
	b = b[:start]
	for i := range len(quoted) {
		switch c := quoted[i]; c {
		case '<', '>', '&':
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return b
}
