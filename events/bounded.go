package events

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// CallTimeout bounds one JetStream request made while a message is
// handled: a publish's PubAck, a KV read or write. A request in flight
// when the server that stores its stream dies (a cluster node, or a
// single server restarting) gets no reply at all; without a bound the
// hop would wait for its whole deadline (minutes), its message kept
// alive by heartbeats. With one it fails, and the message is redelivered
// and retried like any transient failure: its outputs keep their ids and
// KV writes are compare-and-swap or idempotent.
const CallTimeout = 10 * time.Second

// BoundKV returns kv with each single-key read and write (Get,
// GetRevision, Put, PutString, Create, Update, Delete, Purge) bounded by
// d (CallTimeout when d is 0) within the caller's context. Watches,
// listings and history are left as they are.
func BoundKV(kv jetstream.KeyValue, d time.Duration) jetstream.KeyValue {
	if kv == nil {
		return nil
	}
	if b, ok := kv.(boundedKV); ok {
		kv = b.KeyValue
	}
	if d <= 0 {
		d = CallTimeout
	}
	return boundedKV{KeyValue: kv, d: d}
}

type boundedKV struct {
	jetstream.KeyValue
	d time.Duration
}

func (b boundedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.Get(ctx, key)
}

func (b boundedKV) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.GetRevision(ctx, key, revision)
}

func (b boundedKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.Put(ctx, key, value)
}

func (b boundedKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.PutString(ctx, key, value)
}

func (b boundedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.Create(ctx, key, value, opts...)
}

func (b boundedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.Update(ctx, key, value, revision)
}

func (b boundedKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.Delete(ctx, key, opts...)
}

func (b boundedKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.KeyValue.Purge(ctx, key, opts...)
}
