package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestBatchedReadGivesUpWithoutAnAnswer: a batched read that gets no
// answer (the node serving it died with the request in flight) fails
// once its own bound has passed, though the caller's context, a hop's,
// lasts much longer. Before, it waited for the caller's deadline: in a
// 3-node cluster chaos run it held a run's first hop over 40 s, and the
// run's POST /agent/run went unanswered for 30 s.
func TestBatchedReadGivesUpWithoutAnAnswer(t *testing.T) {
	nc, js := connectInternal(t)
	// A responder that takes the request and never answers, as a node
	// that dies after receiving it.
	taken := make(chan struct{}, 1)
	sub, err := nc.Subscribe("$JS.API.DIRECT.GET.KV_gone", func(*nats.Msg) {
		select {
		case taken <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	hop, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = lastMsgsWithin(hop, js, "KV_gone", []string{"$KV.gone.a"}, 300*time.Millisecond)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the read's own deadline", err)
	}
	select {
	case <-taken:
	default:
		t.Fatal("the request never reached the responder")
	}
	if took > 20*time.Second {
		t.Errorf("gave up after %v: bounded by the caller's context, not its own", took)
	}
	if hop.Err() != nil {
		t.Error("the caller's context ended first")
	}
}
