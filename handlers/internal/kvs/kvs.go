package kvs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/nats-io/nats.go/jetstream"
)

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
