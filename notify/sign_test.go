package notify

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// The Standard Webhooks reference vector: reproducing it means receivers'
// Standard Webhooks (and Svix) libraries accept what toolgate sends.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = "1614265330"
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignReferenceVector(t *testing.T) {
	key, err := parseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := sign(key, vectorID, vectorTS, []byte(vectorBody)); got != vectorSig {
		t.Errorf("sign = %q, want %q", got, vectorSig)
	}
	h := http.Header{}
	h.Set("webhook-id", vectorID)
	h.Set("webhook-timestamp", vectorTS)
	h.Set("webhook-signature", vectorSig)
	ts, _ := strconv.ParseInt(vectorTS, 10, 64)
	tolerance := time.Since(time.Unix(ts, 0)) + time.Hour // the vector is from 2021
	if err := Verify(vectorSecret, h, []byte(vectorBody), tolerance); err != nil {
		t.Errorf("Verify(reference vector) = %v", err)
	}
}

func TestVerify(t *testing.T) {
	const secret = "whsec_c2VjcmV0LWtleS1ieXRlcw==" // "secret-key-bytes"
	key, _ := parseSecret(secret)
	body := []byte(`{"a":1}`)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	signed := func(id, ts string, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{"webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	good := sign(key, "m1", now, body)
	old := strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)

	tests := []struct {
		name   string
		secret string
		header http.Header
		body   string
		want   error
	}{
		{"good", secret, signed("m1", now, good), `{"a":1}`, nil},
		{"rotation: any signature may match", secret, signed("m1", now, "v1,AAAA "+good), `{"a":1}`, nil},
		{"tampered body", secret, signed("m1", now, good), `{"a":2}`, ErrSignature},
		{"other id", secret, signed("m2", now, good), `{"a":1}`, ErrSignature},
		{"wrong secret", "whsec_b3RoZXI=", signed("m1", now, good), `{"a":1}`, ErrSignature},
		{"other scheme only", secret, signed("m1", now, "v1a,"+good[3:]), `{"a":1}`, ErrSignature},
		{"not base64", secret, signed("m1", now, "v1,%%%"), `{"a":1}`, ErrSignature},
		{"stale", secret, signed("m1", old, sign(key, "m1", old, body)), `{"a":1}`, ErrTimestamp},
		{"timestamp not a number", secret, signed("m1", "soon", good), `{"a":1}`, ErrTimestamp},
		{"no id", secret, signed("", now, good), `{"a":1}`, ErrMissingHeader},
		{"no signature", secret, signed("m1", now, ""), `{"a":1}`, ErrMissingHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.header, []byte(tt.body), 0)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
	if err := Verify("", signed("m1", now, good), body, 0); err == nil {
		t.Error("Verify with an empty secret = nil, want an error")
	}
}

func TestRawSecret(t *testing.T) {
	// A secret without the whsec_ prefix is the key bytes themselves.
	key, err := parseSecret("plain-key")
	if err != nil || string(key) != "plain-key" {
		t.Fatalf("parseSecret(plain) = %q, %v", key, err)
	}
	req := deliverOne(t, FormatCloudEvents, "plain-key", requested("c1"))
	if err := Verify("plain-key", req.Header, req.Body, time.Minute); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

func TestSignedDelivery(t *testing.T) {
	const secret = "whsec_c2VjcmV0LWtleS1ieXRlcw=="
	for _, format := range []string{FormatCloudEvents, FormatSlack, FormatTeams} {
		t.Run(format, func(t *testing.T) {
			req := deliverOne(t, format, secret, requested("c1"))
			if got := req.Header.Get("webhook-id"); got != "c1" {
				t.Errorf("webhook-id = %q, want the call ID", got)
			}
			if err := Verify(secret, req.Header, req.Body, time.Minute); err != nil {
				t.Errorf("Verify = %v", err)
			}
			tampered := append([]byte(nil), req.Body...)
			tampered[len(tampered)-2] ^= 1
			if err := Verify(secret, req.Header, tampered, time.Minute); !errors.Is(err, ErrSignature) {
				t.Errorf("Verify(tampered) = %v, want ErrSignature", err)
			}
		})
	}
}

func TestUnsignedDelivery(t *testing.T) {
	req := deliverOne(t, FormatCloudEvents, "", resolved("c1", "approved", "alice"))
	if sig, ok := req.Header["Webhook-Signature"]; ok {
		t.Errorf("unsigned target sent webhook-signature %q", sig)
	}
	// The id still lets a receiver deduplicate.
	if got := req.Header.Get("webhook-id"); got != "c1.resolved" {
		t.Errorf("webhook-id = %q, want c1.resolved", got)
	}
}

func TestWebhookIDStableAcrossRetries(t *testing.T) {
	const secret = "whsec_c2VjcmV0LWtleS1ieXRlcw=="
	rc := testkit.NewUpstream(t, statuses(http.StatusServiceUnavailable, http.StatusInternalServerError))
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL, Secret: secret}))
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "delivery", func() bool { return res.final(1) })

	reqs := rc.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("webhook-id"); got != "c1" {
			t.Errorf("attempt %d: webhook-id = %q, want c1", i+1, got)
		}
		if err := Verify(secret, r.Header, r.Body, time.Minute); err != nil {
			t.Errorf("attempt %d: Verify = %v", i+1, err)
		}
	}
}
