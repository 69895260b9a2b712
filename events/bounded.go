package events

import (
	"context"
	"errors"
	"fmt"
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
// d (CallTimeout when d is 0) within the caller's context, and the start
// of each watch and listing (Watch, WatchAll, WatchFiltered, ListKeys,
// ListKeysFiltered) too: starting one creates its consumer, a request
// like any other, and on a cluster that request can be lost with a dying
// node. Once started, a watch lives as long as the caller's context.
// History and Keys are left as they are.
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

func (b boundedKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return startWatcher(ctx, b.d, func(ctx context.Context) (jetstream.KeyWatcher, error) { return b.KeyValue.Watch(ctx, keys, opts...) })
}

func (b boundedKV) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return startWatcher(ctx, b.d, func(ctx context.Context) (jetstream.KeyWatcher, error) { return b.KeyValue.WatchAll(ctx, opts...) })
}

func (b boundedKV) WatchFiltered(ctx context.Context, keys []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return startWatcher(ctx, b.d, func(ctx context.Context) (jetstream.KeyWatcher, error) {
		return b.KeyValue.WatchFiltered(ctx, keys, opts...)
	})
}

func (b boundedKV) ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	return startLister(ctx, b.d, func(ctx context.Context) (jetstream.KeyLister, error) { return b.KeyValue.ListKeys(ctx, opts...) })
}

func (b boundedKV) ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error) {
	return startLister(ctx, b.d, func(ctx context.Context) (jetstream.KeyLister, error) {
		return b.KeyValue.ListKeysFiltered(ctx, filters...)
	})
}

// ErrWatchNotStarted is the error of a watch or listing whose start took
// longer than its bound.
var ErrWatchNotStarted = errors.New("events: watch not started in time")

// boundWatcher and boundLister end the context their watch lives on
// when stopped.
type boundWatcher struct {
	jetstream.KeyWatcher
	end context.CancelCauseFunc
}

func (w boundWatcher) Stop() error { defer w.end(nil); return w.KeyWatcher.Stop() }

type boundLister struct {
	jetstream.KeyLister
	end context.CancelCauseFunc
}

func (l boundLister) Stop() error { defer l.end(nil); return l.KeyLister.Stop() }

func startWatcher(ctx context.Context, d time.Duration, start func(context.Context) (jetstream.KeyWatcher, error)) (jetstream.KeyWatcher, error) {
	w, end, err := startWatch(ctx, d, start)
	if err != nil {
		return nil, err
	}
	return boundWatcher{w, end}, nil
}

func startLister(ctx context.Context, d time.Duration, start func(context.Context) (jetstream.KeyLister, error)) (jetstream.KeyLister, error) {
	l, end, err := startWatch(ctx, d, start)
	if err != nil {
		return nil, err
	}
	return boundLister{l, end}, nil
}

// startWatch runs start on a context of its own, ended with ctx, or with
// ErrWatchNotStarted when start has not returned within d. A watch
// started in time lives on that context until ctx ends or end is called.
func startWatch[W interface{ Stop() error }](ctx context.Context, d time.Duration, start func(context.Context) (W, error)) (w W, end context.CancelCauseFunc, err error) {
	wctx, end := context.WithCancelCause(ctx)
	late := time.AfterFunc(d, func() { end(fmt.Errorf("%w (%s): %w", ErrWatchNotStarted, d, context.DeadlineExceeded)) })
	w, err = start(wctx)
	if !late.Stop() { // the bound ran out, maybe as start returned
		if err == nil {
			_ = w.Stop()
		}
		var none W
		return none, end, context.Cause(wctx)
	}
	if err != nil {
		end(nil)
		return w, end, err
	}
	return w, end, nil
}
