package slackapp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// refusal is a request refused before its payload was looked at.
type refusal struct {
	status int
	msg    string // for the answer and the log; nothing from the request
	err    error  // for the log only
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, msg string, err error) error {
	return &refusal{status: status, msg: msg, err: err}
}

// authenticate reads the body and checks that Slack sent it, now, for the
// first time. It returns the body, or a *refusal.
//
// The order matters: the timestamp costs nothing to check, so a stale
// request is refused before its body is read; the signature is checked
// before the body is parsed; and only signed requests are remembered, so
// a forger cannot fill the replay set.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	ts, err := strconv.ParseInt(r.Header.Get("X-Slack-Request-Timestamp"), 10, 64)
	if err != nil {
		return nil, refuse(http.StatusUnauthorized, "missing or malformed request timestamp", err)
	}
	sent := time.Unix(ts, 0)
	// slack-go checks the same window, but against time.Now; this check
	// uses the configured clock, so tests can move it.
	if h.now().Sub(sent).Abs() > Window {
		return nil, refuse(http.StatusUnauthorized, "stale request timestamp", nil)
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, refuse(http.StatusRequestEntityTooLarge, "request body too large", nil)
	}
	// The listener's body deadline (internal/deadline) makes a read that
	// stalls fail with os.ErrDeadlineExceeded rather than wait.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, refuse(http.StatusRequestEntityTooLarge, "request body too large", nil)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, refuse(http.StatusRequestTimeout, "request body did not arrive in time", err)
		}
		return nil, refuse(http.StatusBadRequest, "request body could not be read", err)
	}

	sv, err := slack.NewSecretsVerifier(r.Header, h.secret)
	if err != nil {
		return nil, refuse(http.StatusUnauthorized, "bad request signature", err)
	}
	_, _ = sv.Write(body) // a hash never fails to write
	if err := sv.Ensure(); err != nil {
		return nil, refuse(http.StatusUnauthorized, "bad request signature", err)
	}

	// The verifier accepts upper- and lower-case hex alike, so the
	// signature is remembered in one case: a replay cannot pass by
	// changing it.
	sig := strings.ToLower(r.Header.Get("X-Slack-Signature"))
	switch h.seen.add(sig, sent.Add(Window), h.now()) {
	case errReplay:
		return nil, refuse(http.StatusUnauthorized, "replayed request", nil)
	case errFull:
		return nil, refuse(http.StatusServiceUnavailable, "too many requests in the replay window", nil)
	}
	if h.first != nil {
		// Twice the window: a timestamp may be up to Window either side.
		switch first, err := h.first(r.Context(), "slack:"+sig, 2*Window); {
		case err != nil:
			return nil, refuse(http.StatusServiceUnavailable, "the replay record could not be checked", err)
		case !first:
			return nil, refuse(http.StatusUnauthorized, "replayed request (seen by another replica)", nil)
		}
	}
	return body, nil
}

// parsePayload reads the payload form field of a signed body.
func parsePayload(body []byte) (slack.InteractionCallback, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return slack.InteractionCallback{}, err
	}
	payload := form.Get("payload")
	if payload == "" {
		return slack.InteractionCallback{}, errors.New("no payload field")
	}
	var ic slack.InteractionCallback
	if err := json.Unmarshal([]byte(payload), &ic); err != nil {
		return slack.InteractionCallback{}, err
	}
	return ic, nil
}

var (
	errReplay = errors.New("replayed")
	errFull   = errors.New("full")
)

// seenSet remembers the signatures of requests accepted within the window.
// A signature covers the timestamp and the body, so a request seen again
// is a replay. Memory is bounded: when the set is full of signatures still
// inside the window, new requests are refused rather than the set grown
// (at Slack's rates, 10,000 clicks in five minutes is an attack or a bug).
type seenSet struct {
	mu     sync.Mutex
	max    int
	expiry map[string]time.Time // signature → when it may be forgotten
}

func newSeenSet(max int) *seenSet {
	return &seenSet{max: max, expiry: make(map[string]time.Time)}
}

// add records sig until forget. It returns errReplay if sig is already
// recorded and errFull if there is no room.
func (s *seenSet) add(sig string, forget, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.expiry[sig]; ok {
		// An entry past its expiry and not yet swept is refused too; its
		// timestamp is stale, so the request would be refused anyway.
		return errReplay
	}
	if len(s.expiry) >= s.max {
		// Sweeping only when full keeps add O(1) in the common case;
		// entries outlive their window a little, which costs memory
		// within the cap, never safety (their timestamps are stale).
		for k, t := range s.expiry {
			if !now.Before(t) {
				delete(s.expiry, k)
			}
		}
		if len(s.expiry) >= s.max {
			return errFull
		}
	}
	s.expiry[sig] = forget
	return nil
}
