package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

// hopOutputs are a hop's outputs: an orchestration message and three
// audit events.
func hopOutputs(t *testing.T, in event.Event) []event.Event {
	t.Helper()
	var outs []event.Event
	out, err := events.Child(in, "next", events.TypeStepFinished, resultMsg{Result: stepResult{Step: 1, TaskID: "t", Outcome: "complete"}})
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, out)
	for i, name := range []string{"step_1.started", "skill.called", "step_1.complete"} {
		a, err := events.Child(in, fmt.Sprintf("audit/%s/%d", name, i), events.AuditType(name), events.Audit{PlanID: "plan-1", Payload: []byte(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, a)
	}
	return outs
}

// TestPublisherPacksAHopsAuditTrail: a hop's audit events are one message
// on audit.<tenant>.batch (the CloudEvents JSON batch format) while its
// orchestration message goes alone; publishing the hop again stores
// nothing new; and a worker on AUDIT hands each event, in order and
// intact, to its handler, then runs the waits they deferred before it
// acknowledges the batch.
func TestPublisherPacksAHopsAuditTrail(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	pub := events.NewPublisher(js)
	in := stepRequest(t, "acme", "run-1", 1)
	outs := hopOutputs(t, in)
	for range 2 {
		if err := pub.PublishAll(testCtx(t), outs); err != nil {
			t.Fatal(err)
		}
	}
	if n := subjectCount(t, js, events.StreamAudit, "audit.acme.batch"); n != 1 {
		t.Fatalf("AUDIT holds %d messages, want the hop's trail as one", n)
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.step.finished.acme"); n != 1 {
		t.Fatalf("AGENT holds %d step.finished, want 1", n)
	}

	var mu sync.Mutex
	var got []event.Event
	var waited []string
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
		id := ev.ID()
		if !events.Defer(ctx, func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			waited = append(waited, id)
			return nil
		}) {
			t.Errorf("%s: not deferred inside a batch", id)
		}
		return nil, nil
	}
	startWorker(t, js, roleProjector, h, events.WorkerConfig{})
	eventually(t, waitLong, "the batch handled and acked", func() bool { return settled(t, js, roleProjector) })
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("handled %d events, want 3", len(got))
	}
	for i, ev := range got {
		want := outs[i+1]
		var a, b events.Audit
		if ev.ID() != want.ID() || ev.Type() != want.Type() || events.MetaOf(ev) != events.MetaOf(want) || !ev.Time().Equal(want.Time()) ||
			events.Decode(ev, &a) != nil || events.Decode(want, &b) != nil || a.PlanID != b.PlanID {
			t.Errorf("event %d: %s %s %+v, want %s %s %+v", i, ev.ID(), ev.Type(), events.MetaOf(ev), want.ID(), want.Type(), events.MetaOf(want))
		}
	}
	if !slices.Equal(waited, []string{outs[1].ID(), outs[2].ID(), outs[3].ID()}) {
		t.Fatalf("waits ran for %v", waited)
	}
}

// TestWorkerBatchFailures: a batch whose wait fails is redelivered and
// handled again; a batch naming another tenant than its subject, or that
// does not decode, is dead-lettered on its first delivery.
func TestWorkerBatchFailures(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var mu sync.Mutex
	calls := 0
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		events.Defer(ctx, func(context.Context) error {
			if first {
				return errors.New("store unavailable")
			}
			return nil
		})
		return nil, nil
	}
	startWorker(t, js, roleProjector, h, events.WorkerConfig{Backoff: []time.Duration{10 * time.Millisecond}})
	if err := events.NewPublisher(js).PublishAll(testCtx(t), hopOutputs(t, stepRequest(t, "acme", "run-2", 1))); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "the batch retried and acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls == 6 && settled(t, js, roleProjector)
	})

	forged := nats.NewMsg("audit.acme.batch")
	forged.Header.Set("content-type", events.ContentTypeBatch)
	other := hopOutputs(t, stepRequest(t, "beta", "run-3", 1))[1]
	b, _ := other.MarshalJSON()
	forged.Data = []byte("[" + string(b) + "]")
	broken := nats.NewMsg("audit.acme.batch")
	broken.Header.Set("content-type", events.ContentTypeBatch)
	broken.Data = []byte(`[{"specversion":"1.0"}]`)
	for _, m := range []*nats.Msg{forged, broken} {
		if _, err := js.PublishMsg(testCtx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, waitLong, "both dead-lettered", func() bool {
		return subjectCount(t, js, events.StreamAgent, events.DeadSubject("acme")) == 2 && settled(t, js, roleProjector)
	})
	mu.Lock()
	defer mu.Unlock()
	if calls != 6 {
		t.Fatalf("the handler saw %d events, want the first batch's twice only", calls)
	}
}
