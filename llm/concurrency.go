package llm

import (
	"context"
	"time"
)

// Slots bound the calls in flight to one model provider from this process:
// every Limited model sharing a Slots waits for a free one before its
// call, and gives up when its context ends. OnWait, when set, is told how
// long each call that found no free slot waited.
type Slots struct {
	Provider string
	OnWait   func(provider string, waited time.Duration)
	free     chan struct{}
}

// NewSlots returns n slots (at least 1) for provider.
func NewSlots(provider string, n int) *Slots {
	return &Slots{Provider: provider, free: make(chan struct{}, max(n, 1))}
}

// Cap is the number of slots.
func (s *Slots) Cap() int { return cap(s.free) }

// Acquire takes a slot, waiting for one while ctx lasts.
func (s *Slots) Acquire(ctx context.Context) error {
	select {
	case s.free <- struct{}{}:
		return nil
	default:
	}
	start := time.Now()
	select {
	case s.free <- struct{}{}:
		if s.OnWait != nil {
			s.OnWait(s.Provider, time.Since(start))
		}
		return nil
	case <-ctx.Done():
		if s.OnWait != nil {
			s.OnWait(s.Provider, time.Since(start))
		}
		return context.Cause(ctx)
	}
}

// Release frees a slot Acquire took.
func (s *Slots) Release() { <-s.free }

// Limited is Model whose calls hold one of Slots while they run.
type Limited struct {
	Model Model
	Slots *Slots
}

// Complete waits for a slot, then calls the model.
func (l Limited) Complete(ctx context.Context, req Request) (Response, error) {
	if l.Slots == nil {
		return l.Model.Complete(ctx, req)
	}
	if err := l.Slots.Acquire(ctx); err != nil {
		return Response{}, err
	}
	defer l.Slots.Release()
	return l.Model.Complete(ctx, req)
}

// MaxOutputTokens is the wrapped model's.
func (l Limited) MaxOutputTokens() int { return MaxOutputOf(l.Model) }
