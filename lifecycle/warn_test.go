package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// TestSweepWarnsOnce: a store that is down fails every sweep, and the
// sweeper says so once per interval, not once per round.
func TestSweepWarnsOnce(t *testing.T) {
	var buf testkit.Buffer
	s, _ := newMemory(time.Now(), time.Hour)
	l, err := New(Config{Store: downStore{s}, Executor: newExec(), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		l.SweepOnce(t.Context(), time.Second)
	}
	n := 0
	for _, rec := range buf.JSONLines(t) {
		if rec["level"] == "WARN" {
			n++
		}
	}
	if n != 2 { // one for Expire, one for Approved
		t.Fatalf("20 failed sweeps wrote %d warnings, want 2", n)
	}
}

// downStore fails what the sweeper asks of it.
type downStore struct{ pending.Store }

var errStoreDown = errors.New("store down")

func (downStore) Expire(_ context.Context, _ int) ([]pending.Call, error) { return nil, errStoreDown }

func (downStore) Approved(_ context.Context, _ time.Duration, _ int) ([]pending.Call, error) {
	return nil, errStoreDown
}
