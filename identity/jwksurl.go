package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/httprc/v3/errsink"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/toolgate/toolgate/internal/logurl"
)

const (
	jwksFetchTimeout    = 10 * time.Second
	jwksMinRefresh      = 5 * time.Minute
	jwksMaxRefresh      = 24 * time.Hour
	jwksForcedRefresh   = time.Minute // at most this often on an unknown kid
	jwksMaxBody         = 1 << 20
	jwksShutdownTimeout = 5 * time.Second
)

// remoteKeys is a JWKS fetched over https and kept fresh by an
// httprc client (the machinery behind jwk.Cache, used directly so that
// every fetched set goes through checkKeySet: a bad refresh keeps the
// previous keys instead of replacing them).
type remoteKeys struct {
	url  string
	u    *url.URL // url parsed, to keep it out of logs (logurl)
	ctrl httprc.Controller
	res  *httprc.ResourceBase[jwk.Set]
	// lastForced is when an unknown kid last caused a fetch (Unix ns); it
	// keeps forged kids from turning into a fetch per request.
	lastForced    atomic.Int64
	forcedRefresh time.Duration
	logger        *slog.Logger
}

// newRemoteKeys starts the refresher and fetches the set once, so that a
// wrong URL or a bad set fails at start rather than on the first token.
func newRemoteKeys(rawURL string, client *http.Client, logger *slog.Logger) (*remoteKeys, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		// Check refuses it first; this is the last line.
		return nil, errors.New("must be an https:// URL")
	}
	if client == nil {
		client = &http.Client{Timeout: jwksFetchTimeout, CheckRedirect: httpsOnly}
	}
	res, err := httprc.NewResource(rawURL, httprc.TransformFunc[jwk.Set](transformKeySet),
		httprc.WithHTTPClient(client),
		httprc.WithMinInterval(jwksMinRefresh),
		httprc.WithMaxInterval(jwksMaxRefresh),
	)
	if err != nil {
		return nil, err
	}
	// Add waits for the first fetch but, when it fails, only sees its
	// context end; the error sink sees why, so it ends the wait early and
	// keeps the first error for New's message.
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout+time.Second)
	defer cancel()
	var firstErr atomic.Pointer[error]
	sink := errsink.NewFunc(func(ctx context.Context, err error) {
		// The client's errors repeat the URL, query and all (a token there
		// is common): both are written without them.
		logger.WarnContext(ctx, "identity: JWKS fetch failed; keeping the previous keys, if any", "url", logurl.URL(u), "err", logurl.Error(err, u))
		if firstErr.CompareAndSwap(nil, &err) {
			cancel()
		}
	})
	// The refresher lives until close, not until some request's context ends.
	ctrl, err := httprc.NewClient(httprc.WithWorkers(1), httprc.WithErrorSink(sink)).Start(context.Background())
	if err != nil {
		return nil, err
	}
	r := &remoteKeys{url: rawURL, u: u, ctrl: ctrl, res: res, forcedRefresh: jwksForcedRefresh, logger: logger}
	if err := ctrl.Add(ctx, res); err != nil {
		if p := firstErr.Load(); p != nil {
			err = *p
		}
		r.close()
		return nil, fmt.Errorf("fetching %s: %w", logurl.URL(u), logurl.Error(err, u))
	}
	return r, nil
}

func transformKeySet(_ context.Context, res *http.Response) (jwk.Set, error) {
	b, err := io.ReadAll(io.LimitReader(res.Body, jwksMaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(b) > jwksMaxBody {
		return nil, fmt.Errorf("larger than %d bytes", jwksMaxBody)
	}
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	// A provider's set often holds keys for other uses (an encryption key,
	// "use": "enc") or of kinds toolgate does not verify with: they are
	// left out, not taken as a failed fetch. A failed fetch keeps the
	// previous keys, so a provider that withdrew a key beside such a one
	// would see it trusted on.
	usable := jwk.NewSet()
	var skipped []error
	for i := range set.Len() {
		key, _ := set.Key(i)
		if err := keyUsable(key, false); err != nil {
			skipped = append(skipped, fmt.Errorf("keys[%d]: %w", i, err))
			continue
		}
		if err := usable.AddKey(key); err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
	}
	if usable.Len() == 0 && len(skipped) > 0 {
		return nil, fmt.Errorf("no key usable for signatures: %w", errors.Join(skipped...))
	}
	if err := checkKeySet(usable, false); err != nil {
		return nil, err
	}
	return usable, nil
}

func httpsOnly(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme != "https" {
		return errors.New("redirect to a non-https URL")
	}
	if len(via) >= 5 {
		return errors.New("too many redirects")
	}
	return nil
}

// current returns the latest good set (nil before the first fetch).
func (r *remoteKeys) current() jwk.Set { return r.res.Resource() }

// refresh fetches the set now unless an unknown kid already caused a fetch
// within forcedRefresh. It reports whether a fresh set was stored.
func (r *remoteKeys) refresh(ctx context.Context) bool {
	now := time.Now().UnixNano()
	last := r.lastForced.Load()
	if last != 0 && now-last < int64(r.forcedRefresh) || !r.lastForced.CompareAndSwap(last, now) {
		return false
	}
	// The fetch runs to its end even if the request that asked for it is
	// gone: it used up the one forced fetch a minute, and cut short it
	// would leave the issuer's new key unknown for that minute.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksFetchTimeout)
	defer cancel()
	// A synchronous refresh reports to us, not to the error sink.
	if err := r.ctrl.Refresh(ctx, r.url); err != nil {
		r.logger.WarnContext(ctx, "identity: JWKS refresh for an unknown kid failed; keeping the previous keys", "err", logurl.Error(err, r.u))
		return false
	}
	return true
}

func (r *remoteKeys) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), jwksShutdownTimeout)
	defer cancel()
	return r.ctrl.ShutdownContext(ctx)
}
