package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Topology configures the streams, consumers and buckets agentbus needs.
// The streams are fixed (AGENT, REPLY); the consumers and buckets
// are the application's, declared with its roles.
type Topology struct {
	Consumers       []Consumer    // one durable pull consumer each
	Buckets         []Bucket      // KV buckets
	ObjectStores    []ObjectStore // object store buckets
	Replicas        int           // stream and bucket replicas; default 1
	MemoryStorage   bool          // memory instead of file storage (benchmarks only)
	AgentMaxAge     time.Duration // default 7 days
	ReplyMaxAge     time.Duration // default 1 hour
	DuplicateWindow time.Duration // default 15 minutes; at least 10 minutes
	AckWait         time.Duration // default 30s; heartbeats keep long work alive
	MaxDeliver      int           // default 10; the projector's is unlimited
	MaxAckPending   int           // default 1000
}

func (t Topology) withDefaults() Topology {
	if t.Replicas == 0 {
		t.Replicas = 1
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&t.AgentMaxAge, 7*24*time.Hour)
	def(&t.ReplyMaxAge, time.Hour)
	def(&t.DuplicateWindow, 15*time.Minute)
	def(&t.AckWait, 30*time.Second)
	if t.MaxDeliver == 0 {
		t.MaxDeliver = 10
	}
	if t.MaxAckPending == 0 {
		t.MaxAckPending = 1000
	}
	return t
}

// Validate reports a configuration that would break a guarantee.
func (t Topology) Validate() error {
	t = t.withDefaults()
	if t.DuplicateWindow < 10*time.Minute {
		return errors.New("events: duplicate window must be at least 10 minutes")
	}
	if t.MaxDeliver < 2 {
		return errors.New("events: max deliver must be at least 2")
	}
	return nil
}

// Consumer declares a durable pull consumer: the role that consumes, the
// stream it reads and its filter subjects. N processes of a role share its
// consumer: that is how agentbus scales out.
type Consumer struct {
	Name    string
	Stream  string
	Filters []string
	// Unlimited: deliveries never run out, so events wait in the stream
	// for as long as a dependency is down; only a permanent error
	// dead-letters.
	Unlimited bool
	// Single: one process at a time reads the consumer (the server pins
	// its priority group, SingleGroup, to one client, and moves the pin
	// when that client stops pulling for SinglePinnedTTL), and it is
	// acknowledged cumulatively (AckAll). The trail reader's.
	Single bool
}

// SinglePinnedTTL is how long a Consumer.Single stays pinned to a client
// that stopped pulling before another may take it over.
const SinglePinnedTTL = 3 * PullExpiry

// Bucket declares a KV bucket.
type Bucket struct {
	Name string
	// TTL of the entries: 0 keeps them forever, KeepWithRuns as long as
	// the AGENT stream keeps events (Topology.AgentMaxAge).
	TTL     time.Duration
	History int // default 1
}

// ObjectStore declares an object store bucket.
type ObjectStore struct {
	Name string
	// TTL of the objects, as Bucket.TTL.
	TTL time.Duration
}

// KeepWithRuns is the Bucket.TTL of entries kept as long as the events of
// their run.
const KeepWithRuns time.Duration = -1

// Bootstrap idempotently creates or updates the streams, the durable
// consumer of every role, the KV buckets and the object stores. Every
// process calls it at start.
func Bootstrap(ctx context.Context, js jetstream.JetStream, t Topology) error {
	if err := t.Validate(); err != nil {
		return err
	}
	t = t.withDefaults()
	storage := jetstream.FileStorage
	if t.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	streams := []jetstream.StreamConfig{
		{Name: StreamAgent, Subjects: []string{"agent.>"}, MaxAge: t.AgentMaxAge, AllowMsgSchedules: true},
		{Name: StreamReply, Subjects: []string{"reply.>"}, MaxAge: t.ReplyMaxAge},
	}
	for _, sc := range streams {
		sc.Storage = storage
		sc.Replicas = t.Replicas
		sc.Duplicates = t.DuplicateWindow
		sc.Retention = jetstream.LimitsPolicy
		sc.AllowAtomicPublish = true // a hop's outputs as one batch (see Publisher)
		if _, err := EnsureStream(ctx, js, sc); err != nil {
			return fmt.Errorf("events: stream %s: %w", sc.Name, err)
		}
	}
	for _, c := range t.Consumers {
		if _, err := EnsureConsumer(ctx, js, c, t); err != nil {
			return err
		}
	}
	for _, b := range t.Buckets {
		kc := jetstream.KeyValueConfig{Bucket: b.Name, TTL: b.TTL, History: uint8(max(b.History, 1)), Storage: storage, Replicas: t.Replicas}
		if b.TTL == KeepWithRuns {
			kc.TTL = t.AgentMaxAge
		}
		if _, err := EnsureKeyValue(ctx, js, kc); err != nil {
			return fmt.Errorf("events: bucket %s: %w", kc.Bucket, err)
		}
	}
	for _, o := range t.ObjectStores {
		oc := jetstream.ObjectStoreConfig{Bucket: o.Name, TTL: o.TTL, Storage: storage, Replicas: t.Replicas}
		if o.TTL == KeepWithRuns {
			oc.TTL = t.AgentMaxAge
		}
		if _, err := EnsureObjectStore(ctx, js, oc); err != nil {
			return fmt.Errorf("events: object store %s: %w", oc.Bucket, err)
		}
	}
	return nil
}

// EnsureConsumer creates or updates the durable consumer c.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, c Consumer, t Topology) (jetstream.Consumer, error) {
	if c.Name == "" || c.Stream == "" || len(c.Filters) == 0 {
		return nil, fmt.Errorf("events: consumer %q needs a stream and filter subjects", c.Name)
	}
	t = t.withDefaults()
	maxDeliver := t.MaxDeliver
	if c.Unlimited {
		maxDeliver = -1
	}
	want := jetstream.ConsumerConfig{
		Durable:        c.Name,
		Description:    "agentbus " + c.Name,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        t.AckWait,
		MaxDeliver:     maxDeliver,
		MaxAckPending:  t.MaxAckPending,
		FilterSubjects: c.Filters,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if c.Single {
		want.AckPolicy = jetstream.AckAllPolicy
		want.PriorityGroups = []string{SingleGroup}
		want.PriorityPolicy = jetstream.PriorityPolicyPinned
		want.PinnedTTL = SinglePinnedTTL
	}
	// An unchanged consumer is left alone, like an unchanged stream.
	if have, err := js.Consumer(ctx, c.Stream, c.Name); err == nil {
		cfg := have.CachedInfo().Config
		if cfg.AckWait == want.AckWait && cfg.MaxDeliver == want.MaxDeliver && cfg.MaxAckPending == want.MaxAckPending &&
			slices.Equal(cfg.FilterSubjects, want.FilterSubjects) && cfg.AckPolicy == want.AckPolicy &&
			cfg.PriorityPolicy == want.PriorityPolicy {
			return have, nil
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, c.Stream, want)
	if err != nil {
		return nil, fmt.Errorf("events: consumer %s: %w", c.Name, err)
	}
	return cons, nil
}
