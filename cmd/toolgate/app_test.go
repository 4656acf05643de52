package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestAppClose: what was opened closes in the reverse order, each step
// within its own bound, errors named and joined, once.
func TestAppClose(t *testing.T) {
	var a app
	var order []string
	step := func(name string, err error) func(context.Context) error {
		return func(ctx context.Context) error {
			order = append(order, name)
			if name == "bounded" {
				if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Second {
					t.Errorf("bounded step: deadline %v %t, want within 1s", dl, ok)
				}
			}
			return err
		}
	}
	a.onClose("tracing", 0, step("tracing", nil))
	a.onClose("bounded", time.Second, step("bounded", errors.New("too slow")))
	a.onClose("store", 0, step("store", nil))
	err := a.Close(t.Context())
	if want := []string{"store", "bounded", "tracing"}; !slices.Equal(order, want) {
		t.Errorf("closed %v, want %v", order, want)
	}
	if err == nil || err.Error() != "bounded: too slow" {
		t.Errorf("Close() = %v, want the step named", err)
	}
	if err := a.Close(t.Context()); err != nil || len(order) != 3 {
		t.Errorf("second Close: %v, steps run %v", err, order)
	}
}
