package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// hangingKV answers no call until its context ends, as a KV whose
// server died with the request in flight.
type hangingKV struct {
	jetstream.KeyValue
	deadlines int
}

func (h *hangingKV) Get(ctx context.Context, _ string) (jetstream.KeyValueEntry, error) {
	return nil, h.wait(ctx)
}

func (h *hangingKV) Update(ctx context.Context, _ string, _ []byte, _ uint64) (uint64, error) {
	return 0, h.wait(ctx)
}

func (h *hangingKV) wait(ctx context.Context) error {
	if _, ok := ctx.Deadline(); ok {
		h.deadlines++
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestBoundKV_AnUnansweredCallFailsWithinTheBound: a KV call whose reply
// never comes, made on a context without a deadline, fails with the
// bound's deadline instead of waiting forever; a bound KV wrapped again
// keeps one bound.
func TestBoundKV_AnUnansweredCallFailsWithinTheBound(t *testing.T) {
	h := &hangingKV{}
	kv := BoundKV(BoundKV(h, 50*time.Millisecond), 50*time.Millisecond)
	if _, ok := kv.(boundedKV).KeyValue.(*hangingKV); !ok {
		t.Fatalf("a bound KV wrapped again is wrapped twice: %T", kv.(boundedKV).KeyValue)
	}
	if _, err := kv.Get(context.Background(), "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get: %v, want the bound's deadline", err)
	}
	if _, err := kv.Update(context.Background(), "k", nil, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update: %v, want the bound's deadline", err)
	}
	if h.deadlines != 2 {
		t.Fatalf("%d of 2 calls had a deadline", h.deadlines)
	}
	// The caller's own, earlier end still wins.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := kv.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get on a cancelled context: %v", err)
	}
	if BoundKV(nil, 0) != nil {
		t.Fatal("BoundKV(nil) is not nil")
	}
}
