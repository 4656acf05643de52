package main

import (
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// adminHandler is the admin listener's handler: /livez, /readyz and
// /metrics. It is never served on the proxy port. ready reports readiness
// and the checks behind it.
func adminHandler(ready func() (bool, map[string]any), gatherer prometheus.Gatherer) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(middleware.GetHead) // HEAD probes, as some load balancers send
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

// writeJSON answers v as JSON, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
