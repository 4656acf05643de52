package decisionlog

import (
	"context"
	"net/http"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/rest"
)

// uploadPluginName names, in the plugin manager, the client the log
// service's uploads go through (the service's credentials plugin).
const uploadPluginName = "toolgate_upload"

// uploadClient is the HTTP client of the log service, as an OPA auth
// plugin. OPA's own clients bound only the wait for the response headers;
// an answer's body is then drained with no deadline, so a service (or
// anyone on an http:// path to it) that answers 200 and trickles its body
// held the uploader, and every later event waited until it was dropped,
// nothing failing or logged. This client bounds the whole exchange. It
// sends the token as OPA's bearer plugin does: not again on a redirect.
type uploadClient struct {
	token string
	whole time.Duration
}

// wholeUpload is the bound of an upload's whole exchange: three times the
// wait for the headers (OPA's default, 10 s, when none is set).
func wholeUpload(headers time.Duration) time.Duration {
	if headers <= 0 {
		headers = 10 * time.Second
	}
	return 3 * headers
}

// NewClient implements rest.HTTPAuthPlugin.
func (u *uploadClient) NewClient(c rest.Config) (*http.Client, error) {
	t, err := rest.DefaultTLSConfig(c)
	if err != nil {
		return nil, err
	}
	client := rest.DefaultRoundTripperClient(t, *c.ResponseHeaderTimeoutSeconds)
	client.Timeout = u.whole
	return client, nil
}

// Prepare implements rest.HTTPAuthPlugin.
func (u *uploadClient) Prepare(req *http.Request) error {
	if u.token == "" {
		return nil
	}
	if r := req.Response; r != nil && (r.StatusCode == http.StatusPermanentRedirect || r.StatusCode == http.StatusTemporaryRedirect) {
		return nil
	}
	req.Header.Set("Authorization", "Bearer "+u.token)
	return nil
}

// Start, Stop and Reconfigure make it a plugin the manager holds.
func (*uploadClient) Start(context.Context) error { return nil }

func (*uploadClient) Stop(context.Context) {}

func (*uploadClient) Reconfigure(context.Context, any) {}
