package decisionlog

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"time"
)

// serviceName names the one log service in the plugin manager's config.
const serviceName = "toolgate-decision-logs"

// managerConfig is the OPA configuration of the plugin manager: labels and,
// when an upload is configured, the log service with its credentials.
func managerConfig(opts Options) ([]byte, error) {
	cfg := map[string]any{}
	if len(opts.Labels) > 0 {
		cfg["labels"] = maps.Clone(opts.Labels)
	}
	if s := opts.Service; s.URL != "" {
		origin, _, err := uploadTarget(s)
		if err != nil {
			return nil, err
		}
		svc := map[string]any{"name": serviceName, "url": origin}
		if s.Timeout > 0 {
			svc["response_header_timeout_seconds"] = seconds(s.Timeout)
		}
		// The token goes through uploadClient, which bounds the whole
		// exchange (upload.go).
		svc["credentials"] = map[string]any{"plugin": uploadPluginName}
		cfg["services"] = []any{svc}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	return b, nil
}

// pluginConfig is the decision_logs section of OPA's configuration.
func pluginConfig(opts Options) []byte {
	cfg := map[string]any{"console": opts.Console != nil}
	if opts.MaskDecision != "" {
		cfg["mask_decision"] = opts.MaskDecision
	}
	if opts.DropDecision != "" {
		cfg["drop_decision"] = opts.DropDecision
	}
	if s := opts.Service; s.URL != "" {
		cfg["service"] = serviceName
		_, cfg["resource"], _ = uploadTarget(s) // managerConfig saw it parse
		rep := map[string]any{}
		if s.BufferBytes > 0 {
			rep["buffer_size_limit_bytes"] = s.BufferBytes
		}
		if s.MinDelay > 0 || s.MaxDelay > 0 {
			lo, hi := seconds(s.MinDelay), seconds(s.MaxDelay)
			rep["min_delay_seconds"], rep["max_delay_seconds"] = lo, max(lo, hi)
		}
		cfg["reporting"] = rep
	}
	b, _ := json.Marshal(cfg) // only strings, numbers and maps: cannot fail
	return b
}

// uploadTarget splits where events are POSTed for OPA's REST client, which
// joins its service's URL, "/" and the resource as strings: a query in the
// URL would end up before the resource (/svc?token=x/logs). The target is
// built here instead, the resource joined to the URL's path and the query
// kept after them, and handed over as the origin (scheme, user
// information, host) and the rest.
func uploadTarget(s Service) (origin, resource string, err error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return "", "", fmt.Errorf("decisionlog: the service URL does not parse") // the error would repeat it
	}
	res := s.Resource
	if res == "" {
		res = "/logs"
	}
	t := u.JoinPath(res)
	origin = (&url.URL{Scheme: t.Scheme, User: t.User, Host: t.Host}).String()
	resource = t.RequestURI()
	if n := len(resource); t.RawQuery != "" && resource[n-1] == '/' {
		resource = resource[:n-1] + "%2F" // OPA trims a trailing "/" off the resource
	}
	return origin, resource, nil
}

// seconds is d in whole seconds, at least one: OPA counts in seconds.
func seconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}
