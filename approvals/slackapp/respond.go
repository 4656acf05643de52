package slackapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/slack-go/slack"
)

// respond posts msg to the interaction's response_url in the background,
// so Slack's request is answered at once. At most MaxInFlight posts run at
// a time; past that, or after Close, msg is dropped and logged.
func (h *Handler) respond(log *slog.Logger, to *url.URL, msg *slack.WebhookMessage) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		log.Warn("slack answer dropped: shutting down")
		return
	}
	select {
	case h.sem <- struct{}{}:
	default:
		h.mu.Unlock()
		log.Warn("slack answer dropped: too many in flight", "max", MaxInFlight)
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()

	go func() {
		defer func() {
			<-h.sem
			h.wg.Done()
		}()
		ctx, cancel := context.WithTimeout(h.ctx, ResponseTimeout)
		defer cancel()
		if err := h.post(ctx, to, msg); err != nil {
			log.Warn("slack answer not delivered", "host", to.Host, "err", err)
			return
		}
		log.Debug("slack answer delivered")
	}()
}

// post sends msg to a response_url. Its errors never contain the URL: it
// is a credential to post into the channel.
func (h *Handler) post(ctx context.Context, to *url.URL, msg *slack.WebhookMessage) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to.String(), bytes.NewReader(body))
	if err != nil {
		return errors.New("building the request failed")
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		return err
	}
	defer res.Body.Close()
	// Slack answers a few bytes ("ok", or an error name); more is not read.
	detail, _ := io.ReadAll(io.LimitReader(res.Body, 256))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %q", res.StatusCode, detail)
	}
	return nil
}
