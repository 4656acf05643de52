package logurl

import (
	"context"
	"log/slog"
	"net/url"
)

// Handler returns h writing every record with u scrubbed (Scrub) from its
// message and its string and error values: for loggers handed to code
// that logs u as it was given (OPA's plugins report a failed upload with
// the URL posted to). h itself, when u has no query or user information.
func Handler(h slog.Handler, u *url.URL) slog.Handler {
	if scrubber(u) == nil {
		return h
	}
	return scrubHandler{h, u}
}

type scrubHandler struct {
	slog.Handler
	u *url.URL
}

func (h scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Scrub(r.Message, h.u), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return scrubHandler{h.Handler.WithAttrs(out), h.u}
}

func (h scrubHandler) WithGroup(name string) slog.Handler {
	return scrubHandler{h.Handler.WithGroup(name), h.u}
}

// attr is a with u scrubbed from its strings and errors, in groups too.
func (h scrubHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Scrub(v.String(), h.u))
	case slog.KindGroup:
		as := v.Group()
		out := make([]any, len(as))
		for i, g := range as {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.Any(a.Key, Error(err, h.u))
		}
	}
	return a
}
