package events_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

func auditEvent(t *testing.T, id string) event.Event {
	t.Helper()
	ev, err := events.New(id, events.AuditType("step_1.started"), events.Meta{Tenant: "acme", Run: "r1"}, events.Audit{PlanID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// streamCount is how many messages stream holds.
func streamCount(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestPublisherBatchesAreAtomic publishes a hop's outputs to in-memory
// streams, where they go as one atomic batch per stream: a batch the
// server refuses stores none of its messages, and a redelivered hop's
// batch counts as stored.
func TestPublisherBatchesAreAtomic(t *testing.T) {
	_, js := bootstrapWith(t, events.Topology{MemoryStorage: true})
	pub := events.NewPublisher(js)
	hop := []event.Event{stepRequest(t, "acme", "r1", 1), auditEvent(t, "a1"), stepRequest(t, "acme", "r1", 2), auditEvent(t, "a2")}
	for _, attempt := range []string{"first", "redelivery"} {
		if err := pub.PublishAll(testCtx(t), hop); err != nil {
			t.Fatalf("PublishAll (%s): %v", attempt, err)
		}
		if a := streamCount(t, js, events.StreamAgent); a != 2 {
			t.Fatalf("after the %s attempt AGENT holds %d messages, want the 2 outputs, the first carrying the trail", attempt, a)
		}
	}

	// A batch with one message the stream refuses stores none of them.
	st, err := js.Stream(testCtx(t), events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 4096
	if _, err := js.UpdateStream(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	big, err := events.New("big", events.TypeStepRequested, events.Meta{Tenant: "acme", Run: "r2"},
		map[string]string{"pad": strings.Repeat("x", 8192)})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishAll(testCtx(t), []event.Event{stepRequest(t, "acme", "r2", 1), big}); err == nil {
		t.Fatal("PublishAll stored a batch holding a message over the stream's size limit")
	}
	if n := streamCount(t, js, events.StreamAgent); n != 2 {
		t.Errorf("AGENT holds %d messages after a refused batch, want still 2", n)
	}

	// A batch mixing a new message with one already stored is the
	// redelivery of a stored batch: it counts as stored, adds nothing.
	again := []event.Event{stepRequest(t, "acme", "r3", 1), hop[0]}
	if err := pub.PublishAll(testCtx(t), again); err != nil {
		t.Fatalf("PublishAll: %v", err)
	}
	if n := streamCount(t, js, events.StreamAgent); n != 2 {
		t.Errorf("AGENT holds %d messages, want still 2", n)
	}
}

// TestPublisherRefusesSharedIDs: two outputs of one hop with one id would
// make the stream keep only the first; that is a bug, refused for good.
func TestPublisherRefusesSharedIDs(t *testing.T) {
	for _, mem := range []bool{false, true} {
		t.Run(fmt.Sprintf("memory=%v", mem), func(t *testing.T) {
			topo := eventstest.TestTopology()
			topo.MemoryStorage = mem
			_, js := bootstrapWith(t, topo)
			err := events.NewPublisher(js).PublishAll(testCtx(t), []event.Event{auditEvent(t, "same"), auditEvent(t, "same")})
			if !errors.Is(err, events.ErrPublish) || !events.IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent publish error", err)
			}
			if n := streamCount(t, js, events.StreamAgent); n != 0 {
				t.Errorf("AGENT holds %d messages, want 0", n)
			}
		})
	}
}

// TestPublisherPipelinesOnFileStreams: a single-replica file stream would
// stage each batch in a file store of its own, so outputs are pipelined
// there, and every one is stored.
func TestPublisherPipelinesOnFileStreams(t *testing.T) {
	_, js := bootstrapWith(t, eventstest.TestTopology())
	hop := []event.Event{stepRequest(t, "acme", "r1", 1), stepRequest(t, "acme", "r1", 2), auditEvent(t, "a1"), auditEvent(t, "a2")}
	for range 2 {
		if err := events.NewPublisher(js).PublishAll(testCtx(t), hop); err != nil {
			t.Fatalf("PublishAll: %v", err)
		}
	}
	if a := streamCount(t, js, events.StreamAgent); a != 2 {
		t.Fatalf("AGENT holds %d messages, want the 2 outputs, the first carrying the trail", a)
	}
}
