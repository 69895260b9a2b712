package events

import (
	"context"
	"errors"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// EnsureStream creates the stream of cfg, or updates it when the stored
// configuration differs in a field agentbus sets. Every process calls it
// at start; leaving an unchanged stream alone keeps N processes starting
// together from sending N concurrent updates for nothing.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, cfg.Name)
	if err == nil && sameStream(st.CachedInfo().Config, cfg) {
		return st, nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	return js.CreateOrUpdateStream(ctx, cfg)
}

func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.MaxAge == want.MaxAge &&
		(want.Duplicates == 0 || have.Duplicates == want.Duplicates) && have.Storage == want.Storage &&
		have.Replicas == max(want.Replicas, 1) && have.AllowMsgSchedules == want.AllowMsgSchedules &&
		have.Retention == want.Retention && have.AllowAtomicPublish == want.AllowAtomicPublish
}

// EnsureKeyValue opens the bucket of cfg, creating it, or updating it when
// its TTL, history, storage or (when cfg names them) replicas differ.
func EnsureKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		st, serr := kv.Status(ctx)
		if serr == nil && st.TTL() == cfg.TTL && st.History() == int64(max(cfg.History, 1)) &&
			st.BackingStore() == "JetStream" && kvStorage(st) == cfg.Storage && (cfg.Replicas == 0 || kvReplicas(st) == cfg.Replicas) {
			return kv, nil
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, err
	}
	return js.CreateOrUpdateKeyValue(ctx, cfg)
}

// kvReplicas is the replica count of a bucket's stream.
func kvReplicas(st jetstream.KeyValueStatus) int {
	if js, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		return js.StreamInfo().Config.Replicas
	}
	return -1
}

func kvStorage(st jetstream.KeyValueStatus) jetstream.StorageType {
	if js, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		return js.StreamInfo().Config.Storage
	}
	return -1
}

// EnsureObjectStore opens the object store of cfg, creating it, or
// updating it when its TTL, storage or replicas differ.
func EnsureObjectStore(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, cfg.Bucket)
	if err == nil {
		st, serr := obs.Status(ctx)
		if serr == nil && st.TTL() == cfg.TTL && st.Storage() == cfg.Storage && st.Replicas() == max(cfg.Replicas, 1) {
			return obs, nil
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, err
	}
	return js.CreateOrUpdateObjectStore(ctx, cfg)
}
