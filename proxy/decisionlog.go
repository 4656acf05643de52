package proxy

import (
	"context"
	"log/slog"
	"time"
)

// logDecision writes the one decision record of a call, in the shape of
// OPA's decision log (decision_id is the call ID). Arguments appear only
// when configured: they can hold anything, secrets included.
func (s *Server) logDecision(c *call, elapsed time.Duration, evalErr error) {
	d := c.decision
	attrs := []slog.Attr{
		slog.String("decision_id", c.id),
		slog.String("call_id", c.id),
		slog.String("kind", c.input.Kind),
		slog.String("upstream", c.up.Name),
		slog.String("subject", c.subject.ID),
		slog.String("method", c.input.HTTP.Method),
		slog.String("path", c.input.HTTP.Path),
	}
	if m := c.input.MCP; m != nil {
		attrs = append(attrs, slog.String("mcp_method", m.Method))
	}
	if t := c.input.Tool; t != nil {
		attrs = append(attrs, slog.String("tool", t.Name))
		if t.HasTarget {
			attrs = append(attrs, slog.String("target", t.Target))
		}
		if s.cfg.LogArguments {
			attrs = append(attrs, slog.Any("arguments", t.Arguments))
		}
	}
	attrs = append(attrs,
		slog.Group("result",
			slog.String("action", d.Action.String()),
			slog.Any("reasons", d.Messages()),
			slog.Any("rule_ids", d.RuleIDs()),
		),
		slog.Float64("decision_ms", float64(elapsed.Microseconds())/1000),
	)
	level := slog.LevelInfo
	if evalErr != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("error", evalErr.Error()))
	}
	s.log.LogAttrs(context.Background(), level, "decision", attrs...)
}
