package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Roles, one durable pull consumer each. N processes of a role share its
// consumer: that is how agentbus scales out.
const (
	RoleRouter     = "router"
	RolePlanner    = "planner"
	RoleExecutor   = "executor"
	RoleAggregator = "aggregator"
	// RoleProjector is the aggregator's second consumer: it indexes the
	// AUDIT stream into the store.
	RoleProjector = "projector"
)

// KV bucket names.
const (
	BucketFanin     = "fanin"
	BucketLocks     = "locks"
	BucketBudgets   = "budgets"
	BucketConfig    = "config"
	BucketToolcalls = "toolcalls"
	// BucketCredentials holds each run's forwarded API key, by run id, so
	// the key never travels in an event. Entries expire after a day and
	// the router deletes them when the run ends.
	BucketCredentials = "credentials"
)

// Topology configures the streams, consumers and buckets agentbus needs.
type Topology struct {
	Replicas        int           // stream and bucket replicas; default 1
	MemoryStorage   bool          // memory instead of file storage (benchmarks only)
	AgentMaxAge     time.Duration // default 7 days
	ReplyMaxAge     time.Duration // default 1 hour
	AuditMaxAge     time.Duration // default 7 days
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
	def(&t.AuditMaxAge, 7*24*time.Hour)
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

// consumerSpec says which stream and subjects a role consumes.
type consumerSpec struct {
	stream  string
	filters []string
}

var consumers = map[string]consumerSpec{
	RoleRouter: {StreamAgent, []string{
		"agent.run.requested.*", "agent.plan.proposed.*", "agent.group.joined.*", "agent.dead.*",
	}},
	RolePlanner:    {StreamAgent, []string{"agent.plan.requested.*"}},
	RoleExecutor:   {StreamAgent, []string{"agent.step.requested.*", "agent.step.iterated.*"}},
	RoleAggregator: {StreamAgent, []string{"agent.step.finished.*"}},
	RoleProjector:  {StreamAudit, []string{"audit.>"}},
}

// Bootstrap idempotently creates or updates the streams, the durable
// consumer of every role and the KV buckets. Every process calls it at start.
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
		{Name: StreamAudit, Subjects: []string{"audit.>"}, MaxAge: t.AuditMaxAge},
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
	for role := range consumers {
		if _, err := EnsureConsumer(ctx, js, role, t); err != nil {
			return err
		}
	}
	buckets := []jetstream.KeyValueConfig{
		{Bucket: BucketFanin, TTL: t.AgentMaxAge, History: 1},
		{Bucket: BucketLocks, TTL: time.Minute, History: 1},
		{Bucket: BucketBudgets, TTL: t.AgentMaxAge, History: 1},
		{Bucket: BucketConfig, History: 5},
		{Bucket: BucketToolcalls, TTL: t.AgentMaxAge, History: 1},
		{Bucket: BucketCredentials, TTL: 24 * time.Hour, History: 1},
	}
	for _, kc := range buckets {
		kc.Storage = storage
		kc.Replicas = t.Replicas
		if _, err := EnsureKeyValue(ctx, js, kc); err != nil {
			return fmt.Errorf("events: bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}

// EnsureConsumer creates or updates the durable consumer of role.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, role string, t Topology) (jetstream.Consumer, error) {
	spec, ok := consumers[role]
	if !ok {
		return nil, fmt.Errorf("events: unknown role %q", role)
	}
	t = t.withDefaults()
	maxDeliver := t.MaxDeliver
	if role == RoleProjector {
		// Audit events wait in the stream for as long as the store is
		// down; only a permanent error (a schema violation) dead-letters.
		maxDeliver = -1
	}
	want := jetstream.ConsumerConfig{
		Durable:        role,
		Description:    "agentbus " + role,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        t.AckWait,
		MaxDeliver:     maxDeliver,
		MaxAckPending:  t.MaxAckPending,
		FilterSubjects: spec.filters,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	// An unchanged consumer is left alone, like an unchanged stream.
	if c, err := js.Consumer(ctx, spec.stream, role); err == nil {
		have := c.CachedInfo().Config
		if have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver && have.MaxAckPending == want.MaxAckPending &&
			slices.Equal(have.FilterSubjects, want.FilterSubjects) {
			return c, nil
		}
	}
	c, err := js.CreateOrUpdateConsumer(ctx, spec.stream, want)
	if err != nil {
		return nil, fmt.Errorf("events: consumer %s: %w", role, err)
	}
	return c, nil
}

// StreamOf returns the stream a role consumes.
func StreamOf(role string) string { return consumers[role].stream }

// Filters returns the filter subjects of a role's consumer.
func Filters(role string) []string { return slices.Clone(consumers[role].filters) }
