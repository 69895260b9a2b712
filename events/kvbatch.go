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
	prefix := "$KV." + bucket + "."
	subjects := make([]string, len(keys))
	for i, k := range keys {
		subjects[i] = prefix + k
	}
	msgs, err := jetstreamext.GetLastMsgsFor(ctx, js, "KV_"+bucket, subjects)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(keys))
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
		out[strings.TrimPrefix(m.Subject, prefix)] = m.Data
	}
	return out, nil
}
