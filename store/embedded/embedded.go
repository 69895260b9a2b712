package embedded

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/store"
)

// Bucket and stream names (before Config.Prefix is applied).
const (
	// BucketMemory is the KV bucket holding Memory documents.
	BucketMemory = "store_memory"
	// BucketPlans is the KV bucket holding Plan documents.
	BucketPlans = "store_plans"
	// BucketSouls is the KV bucket holding Soul documents.
	BucketSouls = "store_souls"
	// BucketSessions is the KV bucket holding Session documents.
	BucketSessions = "store_sessions"
	// BucketDefinitions is the KV bucket holding Definition documents.
	BucketDefinitions = "store_definitions"
	// BucketExecutions is the KV bucket holding Execution records; its
	// TTL (the stream's MaxAge) is Config.ExecutionTTL.
	BucketExecutions = "store_executions"
	// StreamEvents is the stream holding Event documents.
	StreamEvents = "STORE_EVENTS"
	// EventsSubject is the subject root of StreamEvents.
	EventsSubject = "store.events"
	// DuplicateWindow is the JetStream de-duplication window of
	// StreamEvents.
	DuplicateWindow = 10 * time.Minute
)

// Config configures New. The zero value is valid.
type Config struct {
	// Replicas is the replication factor of the buckets and the stream;
	// default 1.
	Replicas int
	// Prefix, when set, namespaces every resource so several stores can
	// share one NATS system: buckets become "<Prefix>_store_memory" etc.,
	// the stream "<Prefix>_STORE_EVENTS" and its subjects
	// "<Prefix>.store.events.>". It may contain only [A-Za-z0-9_-].
	Prefix string
	// ExecutionTTL is how long execution records are kept (the
	// executions bucket's TTL); default store.DefaultExecutionTTL.
	ExecutionTTL time.Duration
	// EventRetention is how long agent_events documents are kept (the
	// events stream's MaxAge); default store.DefaultEventRetention.
	EventRetention time.Duration
}

var prefixRe = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)

// Store is the embedded backend. Create it with New.
type Store struct {
	js       jetstream.JetStream
	memory   jetstream.KeyValue
	plans    jetstream.KeyValue
	souls    jetstream.KeyValue
	sessions jetstream.KeyValue
	// definitions holds the agent, trigger and tool definitions.
	definitions jetstream.KeyValue
	// executions holds the execution records, each kept executionTTL.
	executions   jetstream.KeyValue
	executionTTL time.Duration
	events       jetstream.Stream
	// subjectRoot is EventsSubject, possibly prefixed.
	subjectRoot string

	// written is the version and KV revision of each plan as this store
	// last wrote it, so the next snapshot of a plan is a compare-and-set
	// at that revision without a read (see PutPlan).
	writtenMu sync.Mutex
	written   map[string]writtenPlan
}

// New connects the store to js, creating or updating its buckets and
// stream. It is idempotent and safe to call from several processes.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if js == nil {
		return nil, fmt.Errorf("embedded: nil JetStream: %w", store.ErrInvalidArgument)
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if !prefixRe.MatchString(cfg.Prefix) {
		return nil, fmt.Errorf("embedded: prefix %q: %w", cfg.Prefix, store.ErrInvalidArgument)
	}
	name := func(base string) string {
		if cfg.Prefix == "" {
			return base
		}
		return cfg.Prefix + "_" + base
	}
	if cfg.ExecutionTTL <= 0 {
		cfg.ExecutionTTL = store.DefaultExecutionTTL
	}
	if cfg.EventRetention <= 0 {
		cfg.EventRetention = store.DefaultEventRetention
	}
	s := &Store{js: js, subjectRoot: EventsSubject, executionTTL: cfg.ExecutionTTL}
	if cfg.Prefix != "" {
		s.subjectRoot = cfg.Prefix + "." + EventsSubject
	}
	buckets := []struct {
		kv   *jetstream.KeyValue
		name string
		desc string
		ttl  time.Duration
	}{
		{&s.memory, BucketMemory, "agentbus agent_memory documents", 0},
		{&s.plans, BucketPlans, "agentbus agent_plans documents", 0},
		{&s.souls, BucketSouls, "agentbus agent_souls documents", 0},
		{&s.sessions, BucketSessions, "agentbus agent_sessions documents", 0},
		{&s.definitions, BucketDefinitions, "agentbus agent_definitions documents", 0},
		{&s.executions, BucketExecutions, "agentbus agent_executions records", cfg.ExecutionTTL},
	}
	for _, b := range buckets {
		kv, err := events.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
			Bucket:      name(b.name),
			Description: b.desc,
			History:     1,
			TTL:         b.ttl,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
		})
		if err != nil {
			return nil, fmt.Errorf("embedded: bucket %s: %w", name(b.name), err)
		}
		*b.kv = events.BoundKV(kv, 0) // a reply lost with a dying server fails the call, not the hop's deadline
	}
	stream, err := events.EnsureStream(ctx, js, jetstream.StreamConfig{
		Name:        name(StreamEvents),
		Description: "agentbus agent_events documents",
		Subjects:    []string{s.subjectRoot + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DuplicateWindow,
		MaxAge:      cfg.EventRetention,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: stream %s: %w", name(StreamEvents), err)
	}
	s.events = stream
	if err := s.migrateMemoryKeys(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases the store. It is a no-op: the JetStream connection
// belongs to the caller.
func (s *Store) Close() error { return nil }

// scan calls fn with the latest entry of every live key of kv, stopping at the
// first error. It terminates once the initial values have been delivered.
func scan(ctx context.Context, kv jetstream.KeyValue, fn func(e jetstream.KeyValueEntry) error) error {
	return scanKeys(ctx, kv, ">", fn)
}

// scanKeys is scan over the keys that match filter.
func scanKeys(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(e jetstream.KeyValueEntry) error) error {
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return errors.New("embedded: watcher closed before initial values were delivered")
			}
			if e == nil {
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// list decodes the JSON values of the keys of kv that match filter and
// returns those keep takes (every one when keep is nil); what names them
// in errors.
func list[T any](ctx context.Context, kv jetstream.KeyValue, filter, what string, keep func(T) bool) ([]T, error) {
	var out []T
	err := scanKeys(ctx, kv, filter, func(e jetstream.KeyValueEntry) error {
		var v T
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			return fmt.Errorf("embedded: decode %s: %w", e.Key(), err)
		}
		if keep == nil || keep(v) {
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: list %s: %w", what, err)
	}
	return out, nil
}

// getEntry reads key from kv, mapping a missing key to store.ErrNotFound.
func getEntry(ctx context.Context, kv jetstream.KeyValue, key, what string) (jetstream.KeyValueEntry, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("embedded: %s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: get %s: %w", what, err)
	}
	return e, nil
}
