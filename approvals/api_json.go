package approvals

import (
	"encoding/json"
	"net/http"

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
	b = strictjson.AppendHTMLString(b, a.CallID)
	b = append(b, `,"status":`...)
	b = strictjson.AppendHTMLString(b, a.Status)
	b = append(b, `,"decided_by":`...)
	b = strictjson.AppendHTMLString(b, a.DecidedBy)
	if len(a.Approvals) > 0 {
		b = append(b, `,"approvals":[`...)
		for i, ap := range a.Approvals {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"by":`...)
			b = strictjson.AppendHTMLString(b, ap.By)
			b = append(b, `,"at":`...)
			b = strictjson.AppendHTMLString(b, ap.At)
			b = append(b, `,"comment":`...)
			b = strictjson.AppendHTMLString(b, ap.Comment)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if a.Progress != "" {
		b = append(b, `,"progress":`...)
		b = strictjson.AppendHTMLString(b, a.Progress)
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
		b = strictjson.AppendHTMLString(b, a.Error)
	}
	return append(b, '}'), nil
}
