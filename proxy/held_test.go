package proxy

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/toolgate/toolgate/pending"
)

// TestHeldPerSubject: a principal with MaxHeldPerSubject requests held has
// its next ask answered at once (202, parked all the same) and its next
// long-poll too, while another principal is still held; a place given
// back holds again.
func TestHeldPerSubject(t *testing.T) {
	const hold = 5 * time.Second
	pe := newParkEnv(t, func(c *Config) { c.Hold = hold; c.MaxHeldPerSubject = 2 })
	approve := func(id string) {
		t.Helper()
		if _, err := pe.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Error(err)
		}
	}
	type answer struct {
		status int
		took   time.Duration
	}
	ask := func(n int, header ...string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			start := time.Now()
			res := post(t, pe.url+"/tools/Write", `{"path":"notes/`+strconv.Itoa(n)+`.txt"}`, header...)
			_, _ = io.Copy(io.Discard, res.Body)
			out <- answer{res.StatusCode, time.Since(start)}
		}()
		return out
	}
	agent := []string{"Authorization", "Bearer agent-key"}

	held := []<-chan answer{ask(1, agent...), ask(2, agent...)}
	ids := []string{pe.nextParked(t).ID, pe.nextParked(t).ID}

	// The third is parked but not held.
	a := <-ask(3, agent...)
	third := pe.nextParked(t)
	if a.status != http.StatusAccepted || a.took > hold/2 {
		t.Fatalf("third ask: %d after %v, want 202 at once", a.status, a.took)
	}
	// A long-poll of the same principal is answered at once as well.
	start := time.Now()
	req, _ := http.NewRequest(http.MethodGet, pe.url+"/_toolgate/calls/"+third.ID+"?wait=5s", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if took := time.Since(start); res.StatusCode != http.StatusOK || took > hold/2 {
		t.Fatalf("long-poll: %d after %v, want 200 at once", res.StatusCode, took)
	}
	var m dto.Metric
	if err := pe.server.metrics.notHeld.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 2 {
		t.Errorf("toolgate_requests_not_held_total = %v, want 2", got)
	}

	// Another principal is held: it waits for, and gets, the result.
	other := ask(4) // anonymous
	approve(pe.nextParked(t).ID)
	if a := <-other; a.status != http.StatusOK {
		t.Fatalf("another principal's ask: %d, want 200 after its approval", a.status)
	}

	// The two held asks end; their places are given back.
	for _, id := range ids {
		approve(id)
	}
	for i := range held {
		if a := <-held[i]; a.status != http.StatusOK {
			t.Fatalf("held ask %d: %d after %v, want 200", i+1, a.status, a.took)
		}
	}
	again := ask(5, agent...)
	approve(pe.nextParked(t).ID)
	if a := <-again; a.status != http.StatusOK {
		t.Fatalf("ask after the places came back: %d, want 200 (held until approved)", a.status)
	}
}

// TestHeldLimitCounts: take and done pair per principal, and a bound of
// zero bounds nothing.
func TestHeldLimitCounts(t *testing.T) {
	l := newHeldLimit(2)
	for i, want := range []bool{true, true, false} {
		if got := l.take("a"); got != want {
			t.Fatalf("take %d of a: %v, want %v", i+1, got, want)
		}
	}
	if !l.take("b") {
		t.Fatal("b's places are its own")
	}
	l.done("a")
	for i, want := range []bool{true, false} {
		if got := l.take("a"); got != want {
			t.Fatalf("a place given back, take %d: %v, want %v", i+1, got, want)
		}
	}
	l.done("a")
	l.done("a")
	l.done("b")
	if len(l.n) != 0 {
		t.Fatalf("counts left: %v", l.n)
	}
	unbounded := newHeldLimit(0)
	for range 1000 {
		if !unbounded.take("a") {
			t.Fatal("no bound refused a place")
		}
	}
}
