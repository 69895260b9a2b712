package kvcas

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/fault"
)

// MaxAttempts bounds the reads and writes of one Update: past it the
// update fails with ErrContended.
const MaxAttempts = 64

var (
	// ErrContended is the failure of an Update that lost every attempt
	// to concurrent writers.
	ErrContended = errors.New("kvcas: lost every attempt to concurrent writers")
	// ErrCorrupt is the failure of an Update whose entry does not decode
	// into its type; retrying does not help (it is permanent).
	ErrCorrupt = fault.Permanent(errors.New("kvcas: entry does not decode"))
)

// Entry is a decoded KV value and the revision it was read or written
// at; revision 0 is an absent entry.
type Entry[T any] struct {
	Value    T
	Revision uint64
}

// IsConflict reports whether err is a lost compare-and-set: a create of
// a key another writer created first, or an update at a revision that is
// no longer the entry's. A replicated bucket reports the latter as the
// stream's "wrong last sequence" (10071), which nats.go does not map to
// ErrKeyRevisionMismatch.
func IsConflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Get reads the JSON entry at key: the zero Entry when it is absent.
func Get[T any](ctx context.Context, kv jetstream.KeyValue, key string) (Entry[T], error) {
	var e Entry[T]
	got, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return e, nil
	case err != nil:
		return e, fmt.Errorf("kvcas: read %s: %w", key, err)
	}
	if err := json.Unmarshal(got.Value(), &e.Value); err != nil {
		return Entry[T]{}, fmt.Errorf("%w: %s at revision %d: %v", ErrCorrupt, key, got.Revision(), err)
	}
	e.Revision = got.Revision()
	return e, nil
}

// Update reads the JSON entry at key, passes its value to change (the
// zero T when the entry is absent, with revision 0) and, when change
// reports a write, stores the changed value by compare-and-set. A lost
// race reads the entry again and calls change again, so change must be
// a function of the value it is given. It returns the entry stored, or
// the one read when change wrote nothing; change's error is returned
// as it is.
func Update[T any](ctx context.Context, kv jetstream.KeyValue, key string, change func(v *T, revision uint64) (bool, error)) (Entry[T], error) {
	return UpdateFrom(ctx, kv, key, nil, change)
}

// UpdateFrom is Update whose first attempt starts from known, an entry
// the caller read (or knows to be absent: revision 0) instead of reading
// it again. A known entry that is stale costs one lost race.
func UpdateFrom[T any](ctx context.Context, kv jetstream.KeyValue, key string, known *Entry[T],
	change func(v *T, revision uint64) (bool, error)) (Entry[T], error) {
	for attempt := range MaxAttempts {
		if attempt >= 2 {
			// Lost twice: writers are many. A random pause, growing with
			// the losses, spreads them out so that one is not starved.
			if err := backoff(ctx, attempt); err != nil {
				return Entry[T]{}, err
			}
		}
		var cur Entry[T]
		if known != nil {
			cur, known = *known, nil
		} else {
			var err error
			if cur, err = Get[T](ctx, kv, key); err != nil {
				return cur, err
			}
		}
		write, err := change(&cur.Value, cur.Revision)
		if err != nil || !write {
			return cur, err
		}
		data, err := json.Marshal(cur.Value)
		if err != nil {
			return cur, fmt.Errorf("kvcas: encode %s: %w", key, err)
		}
		var rev uint64
		if cur.Revision == 0 {
			rev, err = kv.Create(ctx, key, data)
		} else {
			rev, err = kv.Update(ctx, key, data, cur.Revision)
		}
		if err == nil {
			cur.Revision = rev
			return cur, nil
		}
		if !IsConflict(err) {
			return cur, fmt.Errorf("kvcas: write %s: %w", key, err)
		}
	}
	return Entry[T]{}, fmt.Errorf("%w: %s, %d attempts", ErrContended, key, MaxAttempts)
}

// maxBackoff bounds the pause before an attempt.
const maxBackoff = 16 * time.Millisecond

// backoff pauses a random time below 2^(attempt-2) ms, at most maxBackoff,
// unless ctx ends first.
func backoff(ctx context.Context, attempt int) error {
	limit := min(time.Millisecond<<min(attempt-2, 10), maxBackoff)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(limit)) + 1))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
