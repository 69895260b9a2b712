package events

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// LastValues reads the current values of keys of a KV bucket with one
// request (a batched direct get of the bucket's last message per key,
// nats-server 2.11+): one round trip however many keys. A key with no
// value (never written, deleted or purged) is absent from the result.
func LastValues(ctx context.Context, js jetstream.JetStream, bucket string, keys []string) (map[string][]byte, error) {
	entries, err := LastEntries(ctx, js, bucket, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(entries))
	for k, e := range entries {
		out[k] = e.Value
	}
	return out, nil
}

// KVValue is a key's current value and its revision.
type KVValue struct {
	Value    []byte
	Revision uint64
}

// LastEntries is LastValues with each value's revision. A key may be a
// filter with wildcards ("tenant.>"): every key it matches is read, up
// to the server's limit of one batch (1024 keys; more fails the call).
func LastEntries(ctx context.Context, js jetstream.JetStream, bucket string, keys []string) (map[string]KVValue, error) {
	prefix := "$KV." + bucket + "."
	subjects := make([]string, len(keys))
	for i, k := range keys {
		subjects[i] = prefix + k
	}
	msgs, err := jetstreamext.GetLastMsgsFor(ctx, js, "KV_"+bucket, subjects)
	if err != nil {
		return nil, err
	}
	out := make(map[string]KVValue, len(keys))
	for m, err := range msgs {
		if errors.Is(err, jetstreamext.ErrNoMessages) {
			break
		}
		if err != nil {
			return nil, err
		}
		if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			continue
		}
		out[strings.TrimPrefix(m.Subject, prefix)] = KVValue{Value: m.Data, Revision: m.Sequence}
	}
	return out, nil
}
