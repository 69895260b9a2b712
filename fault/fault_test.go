package fault_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentbus/agentbus/fault"
)

var errSentinel = fault.Permanent(errors.New("pkg: shape not derivable"))

func TestPermanentIsKeptThroughWrapping(t *testing.T) {
	wrapped := fmt.Errorf("handlers: extraction script: %w", fmt.Errorf("offline: %w", errSentinel))
	if !fault.IsPermanent(wrapped) {
		t.Fatal("a wrapped permanent sentinel is not permanent")
	}
	if !errors.Is(wrapped, errSentinel) || !errors.Is(wrapped, fault.ErrPermanent) {
		t.Fatal("errors.Is does not see the sentinel or the mark through the wrapping")
	}
	if got, want := wrapped.Error(), "handlers: extraction script: offline: pkg: shape not derivable"; got != want {
		t.Fatalf("message %q, want %q: the mark adds nothing to it", got, want)
	}
	var target *myErr
	if !errors.As(fault.Permanent(&myErr{"x"}), &target) || target.s != "x" {
		t.Fatal("errors.As does not see through the mark")
	}
}

type myErr struct{ s string }

func (e *myErr) Error() string { return e.s }

func TestUnmarkedErrorsAreTransient(t *testing.T) {
	for name, err := range map[string]error{
		"nil":          nil,
		"unclassified": errors.New("dial tcp 127.0.0.1:4222: connection refused"),
		"wrapped":      fmt.Errorf("skills: call: %w", errors.New("EOF")),
	} {
		if fault.IsPermanent(err) {
			t.Errorf("%s: %v is permanent, want transient (the default)", name, err)
		}
	}
	if fault.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}

// A hop whose own context ended did not finish: that is transient even
// when the error it got on the way out carries a permanent mark.
func TestAnEndedContextIsNeverPermanent(t *testing.T) {
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		err := fault.Permanent(fmt.Errorf("offline: %w", cause))
		if fault.IsPermanent(err) {
			t.Errorf("%v: permanent, want transient", err)
		}
		if !errors.Is(err, fault.ErrPermanent) {
			t.Errorf("%v: the mark itself is lost", err)
		}
	}
}
