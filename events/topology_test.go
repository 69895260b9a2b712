package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

func TestBootstrapIsIdempotentAndCreatesTopology(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology()) // first call
	ctx := testCtx(t)
	for range 2 {
		if err := events.Bootstrap(ctx, js, testTopology()); err != nil {
			t.Fatalf("repeated Bootstrap: %v", err)
		}
	}

	streams := map[string][]string{
		events.StreamAgent: {"agent.>"},
		events.StreamReply: {"reply.>"},
	}
	for name, subjects := range streams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := info.Config
		if !slices.Equal(cfg.Subjects, subjects) {
			t.Errorf("stream %s subjects %v, want %v", name, cfg.Subjects, subjects)
		}
		if cfg.Duplicates < 10*time.Minute {
			t.Errorf("stream %s duplicate window %v < 10m", name, cfg.Duplicates)
		}
		if cfg.Retention != jetstream.LimitsPolicy || cfg.Storage != jetstream.FileStorage || cfg.Replicas != 1 {
			t.Errorf("stream %s retention %v storage %v replicas %d", name, cfg.Retention, cfg.Storage, cfg.Replicas)
		}
		if name == events.StreamAgent && !cfg.AllowMsgSchedules {
			t.Errorf("stream AGENT does not allow message schedules")
		}
	}

	for _, want := range testTopology().Consumers {
		c, err := js.Consumer(ctx, want.Stream, want.Name)
		if err != nil {
			t.Fatalf("consumer %s on %s: %v", want.Name, want.Stream, err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := info.Config
		filters := cfg.FilterSubjects
		if len(filters) == 0 && cfg.FilterSubject != "" {
			filters = []string{cfg.FilterSubject}
		}
		if !slices.Equal(filters, want.Filters) {
			t.Errorf("consumer %s filters %v, want %v", want.Name, filters, want.Filters)
		}
		wantMax := 4
		if want.Unlimited {
			wantMax = -1 // its events wait out a dependency's outage
		}
		wantAck := jetstream.AckExplicitPolicy
		if want.Single {
			// One reader at a time, acknowledging cumulatively.
			wantAck = jetstream.AckAllPolicy
			if cfg.PriorityPolicy != jetstream.PriorityPolicyPinned || !slices.Equal(cfg.PriorityGroups, []string{events.SingleGroup}) {
				t.Errorf("consumer %s priority %v groups %v, want pinned to one client", want.Name, cfg.PriorityPolicy, cfg.PriorityGroups)
			}
		}
		if cfg.Durable != want.Name || cfg.AckPolicy != wantAck || cfg.AckWait != 2*time.Second || cfg.MaxDeliver != wantMax || cfg.MaxAckPending != 1000 {
			t.Errorf("consumer %s config durable=%q ack=%v wait=%v maxdeliver=%d maxackpending=%d",
				want.Name, cfg.Durable, cfg.AckPolicy, cfg.AckWait, cfg.MaxDeliver, cfg.MaxAckPending)
		}
	}
	for _, stream := range []string{events.StreamAgent, events.StreamReply} {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		names := st.ConsumerNames(ctx)
		for range names.Name() {
			n++
		}
		if err := names.Err(); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{events.StreamAgent: 3, events.StreamReply: 0}[stream]
		if n != want {
			t.Errorf("stream %s has %d consumers, want %d", stream, n, want)
		}
	}

	for _, b := range testTopology().Buckets {
		kv, err := js.KeyValue(ctx, b.Name)
		if err != nil {
			t.Errorf("bucket %s: %v", b.Name, err)
			continue
		}
		if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
			t.Errorf("bucket %s put: %v", b.Name, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantTTL := map[string]time.Duration{"fanin": 7 * 24 * time.Hour, "locks": time.Minute, "config": 0}[b.Name]
		if st.TTL() != wantTTL || st.History() != int64(max(b.History, 1)) {
			t.Errorf("bucket %s ttl %v history %d, want %v and %d", b.Name, st.TTL(), st.History(), wantTTL, max(b.History, 1))
		}
	}
	obs, err := js.ObjectStore(ctx, "artifacts")
	if err != nil {
		t.Fatalf("object store: %v", err)
	}
	if _, err := obs.PutString(ctx, "t/o", "v"); err != nil {
		t.Errorf("object store put: %v", err)
	}
	if st, err := obs.Status(ctx); err != nil || st.TTL() != 7*24*time.Hour || st.Storage() != jetstream.FileStorage {
		t.Errorf("object store status %+v, %v; want the runs' TTL on file storage", st, err)
	}
}

func TestBootstrapUpdatesConsumers(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	ctx := testCtx(t)
	topo := testTopology()
	topo.AckWait = 3 * time.Second
	topo.MaxDeliver = 6
	if err := events.Bootstrap(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	info := consumerInfo(t, js, roleExecutor)
	if info.Config.AckWait != 3*time.Second || info.Config.MaxDeliver != 6 {
		t.Fatalf("consumer not updated: ack wait %v max deliver %d", info.Config.AckWait, info.Config.MaxDeliver)
	}
}

func TestBootstrapDefaults(t *testing.T) {
	t.Parallel()
	s := eventstest.Server(t)
	_, js := eventstest.Connect(t, s)
	ctx := testCtx(t)
	if err := events.Bootstrap(ctx, js, events.Topology{Consumers: testTopology().Consumers}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Duplicates != 15*time.Minute || info.Config.MaxAge != 7*24*time.Hour {
		t.Errorf("AGENT duplicates %v max age %v", info.Config.Duplicates, info.Config.MaxAge)
	}
	ci := consumerInfo(t, js, roleRouter)
	if ci.Config.AckWait != 30*time.Second || ci.Config.MaxDeliver != 10 {
		t.Errorf("router ack wait %v max deliver %d", ci.Config.AckWait, ci.Config.MaxDeliver)
	}
}

func TestTopologyValidate(t *testing.T) {
	if err := (events.Topology{}).Validate(); err != nil {
		t.Errorf("default topology: %v", err)
	}
	if err := eventstest.TestTopology().Validate(); err != nil {
		t.Errorf("test topology: %v", err)
	}
	if err := (events.Topology{DuplicateWindow: 10 * time.Minute}).Validate(); err != nil {
		t.Errorf("10m duplicate window: %v", err)
	}
	for _, bad := range []events.Topology{
		{DuplicateWindow: 10*time.Minute - time.Second},
		{DuplicateWindow: time.Minute},
		{MaxDeliver: 1},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted it", bad)
		}
	}
}

func TestBootstrapRejectsInvalidTopology(t *testing.T) {
	t.Parallel()
	s := eventstest.Server(t)
	_, js := eventstest.Connect(t, s)
	ctx := testCtx(t)
	if err := events.Bootstrap(ctx, js, events.Topology{DuplicateWindow: 5 * time.Minute}); err == nil {
		t.Fatal("Bootstrap accepted a 5m duplicate window")
	}
	if _, err := js.Stream(ctx, events.StreamAgent); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("an invalid topology created streams: %v", err)
	}
	if _, err := events.EnsureConsumer(ctx, js, events.Consumer{Name: "janitor"}, events.Topology{}); err == nil {
		t.Fatal("EnsureConsumer accepted a consumer with no stream or filters")
	}
}

func TestRunServerNeedsStoreDir(t *testing.T) {
	if _, err := events.RunServer(events.ServerConfig{Port: -1}); err == nil {
		t.Fatal("RunServer without a store dir succeeded")
	}
}

// TestBootstrapLeavesAnUnchangedTopologyAlone: a second bootstrap with the
// same settings sends no stream or consumer update, so processes starting
// together do not race the server with updates for nothing; a changed
// setting is still applied.
func TestBootstrapLeavesAnUnchangedTopologyAlone(t *testing.T) {
	_, nc, js := eventstest.Bootstrap(t, testTopology())
	ctx := context.Background()
	var mu sync.Mutex
	var updates []string
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.>", func(m *nats.Msg) {
		if strings.Contains(m.Subject, "UPDATED") || strings.Contains(m.Subject, "CREATED") {
			mu.Lock()
			updates = append(updates, m.Subject)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// seen waits until every advisory sent before it has arrived: a
	// stream's advisories and its consumers' go out in order, so once a
	// consumer created on every stream has had its advisory arrive, so
	// have the ones before. It returns them, the fence's left out.
	fences := 0
	seen := func() []string {
		t.Helper()
		fences++
		fence := fmt.Sprintf("fence%d", fences)
		names := js.StreamNames(ctx)
		var streams, want []string
		for name := range names.Name() {
			streams = append(streams, name)
		}
		if names.Err() != nil {
			t.Fatal(names.Err())
		}
		for _, name := range streams {
			if _, err := js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: fence}); err != nil {
				t.Fatal(err)
			}
			want = append(want, "$JS.EVENT.ADVISORY.CONSUMER.CREATED."+name+"."+fence)
		}
		defer func() {
			for _, name := range streams {
				if err := js.DeleteConsumer(ctx, name, fence); err != nil {
					t.Fatal(err)
				}
			}
		}()
		eventually(t, waitLong, "the fence's advisories", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range want {
				if !slices.Contains(updates, w) {
					return false
				}
			}
			return true
		})
		mu.Lock()
		defer mu.Unlock()
		var got []string
		for _, u := range updates {
			if !strings.Contains(u, ".fence") {
				got = append(got, u)
			}
		}
		updates = nil
		return got
	}
	seen() // the first bootstrap's
	if err := events.Bootstrap(ctx, js, testTopology()); err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 0 {
		t.Fatalf("an unchanged bootstrap sent %v", got)
	}
	changed := testTopology()
	changed.AckWait = 3 * time.Second
	if err := events.Bootstrap(ctx, js, changed); err != nil {
		t.Fatal(err)
	}
	if ci := consumerInfo(t, js, roleRouter); ci.Config.AckWait != 3*time.Second {
		t.Fatalf("changed ack wait not applied: %v", ci.Config.AckWait)
	}
}
