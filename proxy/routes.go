package proxy

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/toolgate/toolgate/internal/deadline"
)

// Handler returns the proxy listener's handler: every request is a call to
// decide. No buffering or timeout middleware wraps it: answers stream, and
// held calls may wait.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	// The status of parked calls lives under a prefix no upstream can own.
	r.HandleFunc("/_toolgate/calls/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.serveStatus(w, r, chi.URLParam(r, "id"))
	})
	// The rest of the prefix is toolgate's too, answered, never forwarded
	// (/_toolgate/calls/ without an ID included), with a call ID as every
	// answer of toolgate's own has.
	notFound := func(w http.ResponseWriter, r *http.Request) {
		s.respond(w, &call{id: s.cfg.NewCallID(), out: restResponder{}}, *invalid(http.StatusNotFound, "Not found", "toolgate has no such endpoint: follow a call at /_toolgate/calls/{id}"))
	}
	r.HandleFunc(ownPrefix+"*", notFound)
	r.HandleFunc(strings.TrimSuffix(ownPrefix, "/"), notFound)
	r.HandleFunc("/*", s.serveCall)
	// Whatever chi does not route (an asterisk-form target) is still a
	// call toolgate answers itself, with its call ID.
	r.NotFound(s.serveCall)
	r.MethodNotAllowed(s.serveCall)
	// With tracing on, every request gets a server span (the admin
	// listener is not traced: probes and scrapes are noise).
	// The body deadline wraps everything: it needs the server's own
	// ResponseWriter (otelhttp's wrapper cannot set a read deadline).
	return deadline.Body(s.tracing.handler(r), s.cfg.BodyTimeout)
}
