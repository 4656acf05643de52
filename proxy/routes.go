package proxy

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	r.HandleFunc("/*", s.serveCall)
	// Whatever chi does not route (an asterisk-form target) is still a
	// call toolgate answers itself, with its call ID.
	r.NotFound(s.serveCall)
	r.MethodNotAllowed(s.serveCall)
	// With tracing on, every request gets a server span (the admin
	// listener is not traced: probes and scrapes are noise).
	return s.tracing.handler(r)
}

// ReadyFunc reports readiness and the checks behind it.
type ReadyFunc func() (ready bool, checks map[string]any)

// AdminHandler returns the admin listener's handler: /livez, /readyz and
// /metrics. Never expose it on the proxy port.
func AdminHandler(ready ReadyFunc, gatherer prometheus.Gatherer) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Get("/livez", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, checks := ready()
		status, word := http.StatusOK, "ok"
		if !ok {
			status, word = http.StatusServiceUnavailable, "unavailable"
		}
		writeJSON(w, status, map[string]any{"status": word, "checks": checks})
	})
	r.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return r
}
