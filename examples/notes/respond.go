package notes

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// statusError is an error with the HTTP status and the message a client
// sees.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &statusError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeError is the one place that maps errors to HTTP status. The messages
// of this package's errors name only paths the client sent, so they are safe
// to return; anything else is a generic 500.
func writeError(w http.ResponseWriter, err error) {
	code, msg := http.StatusInternalServerError, "internal error"
	if se, ok := errors.AsType[*statusError](err); ok {
		code, msg = se.code, se.msg
	} else if errors.Is(err, ErrNotFound) {
		code, msg = http.StatusNotFound, err.Error()
	} else if errors.Is(err, ErrInvalidPath) {
		code, msg = http.StatusBadRequest, err.Error()
	}
	writeJSON(w, code, map[string]string{"error": msg})
}

// methodNotAllowed answers 405 with the Allow header RFC 9110 requires.
func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, &statusError{http.StatusMethodNotAllowed, r.Method + " is not allowed here; use " + allow})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only this package's own result types reach here, and they
		// always marshal.
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
