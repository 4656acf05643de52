package decisionlog

import (
	"encoding/json"
	"fmt"
	"maps"
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
		svc := map[string]any{"name": serviceName, "url": s.URL}
		if s.Timeout > 0 {
			svc["response_header_timeout_seconds"] = seconds(s.Timeout)
		}
		if s.Token != "" {
			svc["credentials"] = map[string]any{"bearer": map[string]any{"token": s.Token}}
		}
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
		if s.Resource != "" {
			cfg["resource"] = s.Resource
		}
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

// seconds is d in whole seconds, at least one: OPA counts in seconds.
func seconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}
