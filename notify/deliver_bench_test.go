package notify

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDeliver is what one target costs an ask: the requested and the
// resolved event rendered and posted, each to a receiver that reads it and
// answers 204 at once (the receiver's allocations count too). "signed"
// signs them the Standard Webhooks way.
func BenchmarkDeliver(b *testing.B) {
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(rc.Close)
	for _, bc := range []struct{ name, format, secret string }{
		{"cloudevents", FormatCloudEvents, ""},
		{"cloudevents-signed", FormatCloudEvents, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n, err := New(Options{Targets: []Target{{URL: rc.URL + "/hook", Format: bc.format, Secret: bc.secret}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = n.Close(context.Background()) })
			w := n.workers[0]
			req, res := requested("RLYOGGLFSOIJNCKHNTPSJUXSXP"), resolved("RLYOGGLFSOIJNCKHNTPSJUXSXP", "approved", "bench-approver")
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				for _, e := range []*Event{&req, &res} {
					if got := w.deliver(b.Context(), *e, e.id()); got != ResultDelivered {
						b.Fatalf("deliver: %s", got)
					}
				}
			}
			// The process's CPU, the receiver's included: steadier than
			// ns/op, which is mostly waiting on the loopback round trip.
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user and system CPU this process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
