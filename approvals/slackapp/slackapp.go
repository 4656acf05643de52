// Package slackapp receives the clicks on the Approve and Reject buttons
// of toolgate's Slack messages (notify, with Options.SlackInteractive):
// Slack posts them to POST /slack/interactions on the approvals listener.
//
// A request is refused (401) unless it carries a valid v0 signature made
// with the app's signing secret, a timestamp within five minutes of now,
// and a signature not seen before; nothing in it is parsed before that.
// The clicking Slack user must be mapped to an approver in Config.Users;
// anyone else is told so, privately, and nothing changes. The decision is
// made by Config.Decide, and Slack is answered at once; the outcome is
// then written back through the interaction's response_url, replacing the
// buttons with who decided.
//
// What it does not know: stores, policies, quorums and who is eligible.
// Those belong to the Decider, which cmd/toolgate builds on the approvals
// package; a refusal it returns is shown to the clicking user.
package slackapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/toolgate/toolgate/notify"
)

// Path is where the handler expects Slack's interaction requests; it is
// the app's Interactivity Request URL on the approvals listener.
const Path = "/slack/interactions"

// Limits of the handler.
const (
	// Window is how far a request's timestamp may be from now, either way.
	Window = 5 * time.Minute
	// MaxBodyBytes bounds a request body. Block action payloads carry the
	// whole message, a few KiB for toolgate's.
	MaxBodyBytes = 64 << 10
	// ResponseTimeout bounds one post to a response_url.
	ResponseTimeout = 5 * time.Second
	// MaxInFlight bounds the response_url posts in flight; past it, an
	// answer is dropped (the decision stands; the message just keeps its
	// buttons, and a later click is told the call is decided).
	MaxInFlight = 16
	// maxSeen bounds the signatures remembered against replays.
	maxSeen = 10000
)

// Decider decides callID as approver; it returns the call's state after
// the decision. Its error's text is shown to the clicking user, so it is
// written for people and holds nothing secret.
type Decider func(ctx context.Context, callID, approver string, approve bool) (Outcome, error)

// Outcome is a call as it stands after a decision.
type Outcome struct {
	CallID, Tool, Upstream, Subject string
	// State is the call's state as the pending package names it: waiting,
	// approved, executing, executed, rejected, expired, failed.
	State string
	// DecidedBy is who settled the call; empty while it waits.
	DecidedBy string
	// Approvals counts the approvals so far; Needed is how many the call
	// needs, 0 for a single approval.
	Approvals, Needed int
}

// Config configures a [Handler].
type Config struct {
	// SigningSecret is the Slack app's signing secret. Required.
	SigningSecret string
	// Users maps Slack user IDs (U…, W…) to approver identities, as the
	// approvals listener names approvers. Required; a user not in it
	// decides nothing. New copies it.
	Users map[string]string
	// Decide decides a call. Required.
	Decide Decider
	// Client posts to response_url. Nil: a client with a 5s timeout that
	// follows no redirects.
	Client *http.Client
	// Logger receives the handler's logs; nil discards them. They carry
	// call IDs, Slack user IDs and approvers, never a response_url (it is
	// a credential to post into the channel) or the signing secret.
	Logger *slog.Logger
	// Now is the clock for the timestamp window. Nil: time.Now.
	Now func() time.Time
	// AllowResponseURL reports whether the handler may post to a
	// response_url. Nil: ResponseURL.
	AllowResponseURL func(*url.URL) bool
	// FirstUse, if set, records a signature in a store every replica
	// shares and reports whether it is new there, so that a click one
	// replica received is a replay on all of them (pending.Nonces). Nil:
	// each replica remembers only what it received.
	FirstUse func(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// Handler serves [Path]. It is safe for concurrent use. Create it with
// [New] and stop it with [Handler.Close] after the listener has stopped.
type Handler struct {
	secret  string
	users   map[string]string
	decide  Decider
	client  *http.Client
	ownHTTP bool
	log     *slog.Logger
	now     func() time.Time
	allow   func(*url.URL) bool

	seen  *seenSet
	first func(ctx context.Context, key string, ttl time.Duration) (bool, error)

	sem    chan struct{} // response_url posts in flight
	mu     sync.Mutex    // guards closed against wg.Add after Close
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // of every response_url post; cancelled by Close
	stop   context.CancelFunc
}

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.SigningSecret == "":
		return nil, errors.New("slackapp: no signing secret")
	case len(cfg.Users) == 0:
		return nil, errors.New("slackapp: no users: map Slack user IDs to approvers")
	case cfg.Decide == nil:
		return nil, errors.New("slackapp: no Decide function")
	}
	users := make(map[string]string, len(cfg.Users))
	for id, approver := range cfg.Users {
		if id == "" || approver == "" {
			return nil, fmt.Errorf("slackapp: users: empty Slack user ID or approver (%q: %q)", id, approver)
		}
		users[id] = approver
	}
	h := &Handler{
		secret: cfg.SigningSecret,
		users:  users,
		decide: cfg.Decide,
		client: cfg.Client,
		log:    cfg.Logger,
		now:    cfg.Now,
		allow:  cfg.AllowResponseURL,
		seen:   newSeenSet(maxSeen),
		first:  cfg.FirstUse,
		sem:    make(chan struct{}, MaxInFlight),
	}
	if h.client == nil {
		h.client, h.ownHTTP = &http.Client{
			Timeout: ResponseTimeout,
			// A redirect could lead anywhere, and AllowResponseURL checked
			// only the first URL.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}, true
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.allow == nil {
		h.allow = ResponseURL
	}
	h.ctx, h.stop = context.WithCancel(context.Background())
	return h, nil
}

// ResponseURL is the default AllowResponseURL: an https URL, or an http
// one on this host, without user info. The URL is part of the signed
// payload: only Slack names it (its own are on hooks.slack.com, GovSlack's
// on slack-gov.com), or whoever holds the signing secret, who could decide
// calls anyway; a host list would refuse GovSlack and test stand-ins
// without keeping out anyone the signature lets in. Plain http stays on
// loopback (a local stand-in): off the host the URL, a credential to post
// into the channel, would cross the network in clear, and http is how cloud
// metadata endpoints and most internal services answer.
func ResponseURL(u *url.URL) bool {
	if u.Host == "" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		host := u.Hostname()
		a, err := netip.ParseAddr(host)
		return host == "localhost" || err == nil && a.Unmap().IsLoopback()
	}
	return false
}

// ServeHTTP handles one interaction request. Slack wants a 200 within 3
// seconds whatever happened, so everything after authentication answers
// 200 and tells the user through response_url.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := h.authenticate(w, r)
	if err != nil {
		var re *refusal
		if !errors.As(err, &re) {
			re = &refusal{status: http.StatusBadRequest, msg: "bad request"}
		}
		h.log.Warn("slack interaction refused", "status", re.status, "reason", re.msg, "err", re.err)
		// The body may be unread (a stale or oversized request): closing
		// the connection keeps the server from reading it to reuse it.
		w.Header().Set("Connection", "close")
		http.Error(w, re.msg, re.status)
		return
	}

	ic, err := parsePayload(body)
	if err != nil {
		h.log.Warn("slack interaction unreadable", "err", err)
		http.Error(w, "unreadable payload", http.StatusBadRequest)
		return
	}
	act, ok := toolgateAction(&ic)
	if !ok {
		h.log.Debug("slack interaction ignored", "type", ic.Type, "user", ic.User.ID)
		w.WriteHeader(http.StatusOK)
		return
	}
	log := h.log.With("call_id", act.callID, "user", ic.User.ID, "approve", act.approve)
	respondTo, err := url.Parse(ic.ResponseURL)
	if err != nil || !respondTo.IsAbs() || !h.allow(respondTo) {
		// Nowhere to tell the user what happened: decide nothing rather
		// than change a call in silence.
		log.Warn("slack interaction refused: response_url is not an http(s) URL", "host", hostOf(respondTo))
		http.Error(w, "response_url not allowed", http.StatusBadRequest)
		return
	}

	approver, ok := h.users[ic.User.ID]
	if !ok {
		log.Warn("slack interaction from a user who is not an approver")
		w.WriteHeader(http.StatusOK)
		h.respond(log, respondTo, ephemeral("You are not a toolgate approver, so this button does nothing for you."))
		return
	}
	log = log.With("approver", approver)

	o, err := h.decide(r.Context(), act.callID, approver, act.approve)
	if err != nil {
		log.Info("slack decision refused", "err", err)
		w.WriteHeader(http.StatusOK)
		h.respond(log, respondTo, ephemeral("toolgate did not record your decision: "+esc(err.Error(), 1000)))
		return
	}
	log.Info("slack decision recorded", "state", o.State, "approvals", o.Approvals, "needed", o.Needed)
	w.WriteHeader(http.StatusOK)
	h.respond(log, respondTo, updated(&ic, o, approver))
}

// action is the toolgate button a payload reports.
type action struct {
	callID  string
	approve bool
}

// toolgateAction finds the Approve or Reject click in a block_actions
// payload. Anything else (the page link, other apps' buttons, other
// payload types) is not toolgate's to act on.
func toolgateAction(ic *slack.InteractionCallback) (action, bool) {
	if ic.Type != slack.InteractionTypeBlockActions {
		return action{}, false
	}
	for _, a := range ic.ActionCallback.BlockActions {
		if a == nil || a.Value == "" {
			continue
		}
		switch a.ActionID {
		case notify.SlackApproveActionID:
			return action{callID: a.Value, approve: true}, true
		case notify.SlackRejectActionID:
			return action{callID: a.Value, approve: false}, true
		}
	}
	return action{}, false
}

// Close stops answering through response_url and waits for the posts in
// flight until they end or ctx does; then it cancels them and returns
// ctx's error. Call it after the listener has stopped serving.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()

	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		h.stop()
		<-done // prompt: every post watches h.ctx
		err = fmt.Errorf("slackapp: closing: %w", ctx.Err())
	}
	h.stop()
	if h.ownHTTP {
		h.client.CloseIdleConnections()
	}
	return err
}

func hostOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Host
}
