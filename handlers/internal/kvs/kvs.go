package kvs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
)

// IsConflict reports a lost compare-and-swap of a KV create or update:
// another writer came first.
func IsConflict(err error) bool {
	return err != nil && (errors.Is(err, jetstream.ErrKeyExists) || IsWrongSequence(err))
}

// IsWrongSequence reports a lost compare-and-swap. Replicated buckets
// report it as code 10164, which nats.go wraps in ErrKeyRevisionMismatch.
func IsWrongSequence(err error) bool {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// UpdateJSON reads the JSON entry at key (zero when absent), lets change
// edit it and writes it back by compare-and-swap when change says so,
// retrying on a concurrent writer.
func UpdateJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, change func(*T) (bool, error)) error {
	for range maxDrawAttempts {
		var cur T
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("handlers: read %s: %w", key, err)
		default:
			if err := json.Unmarshal(e.Value(), &cur); err != nil {
				return fmt.Errorf("handlers: entry %s: %w", key, err)
			}
			rev = e.Revision()
		}
		write, err := change(&cur)
		if err != nil || !write {
			return err
		}
		val, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, val)
		} else {
			_, err = kv.Update(ctx, key, val, rev)
		}
		if err == nil {
			return nil
		}
		if !IsConflict(err) {
			return fmt.Errorf("handlers: write %s: %w", key, err)
		}
	}
	return fmt.Errorf("handlers: write %s: %d concurrent attempts lost the race", key, maxDrawAttempts)
}

// Follow applies w's entries with apply, in a goroutine, until the
// watcher ends (with its context), and returns once the values stored
// when it started have been applied, or ctx ends first.
func Follow(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error {
	first := make(chan struct{})
	go func() {
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil { // the stored values are in
				close(first)
				continue
			}
			apply(e)
		}
	}()
	select {
	case <-first:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Key maps any string (a memory key, an idempotency key, a run id) onto
// the KV key alphabet.
func Key(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// maxDrawAttempts bounds the compare-and-swap retries of one draw.
const maxDrawAttempts = 64
