package events_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// lastMsg is the last message stream holds on subject.
func lastMsg(t *testing.T, js jetstream.JetStream, stream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	st, err := js.Stream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(testCtx(t), subject)
	if err != nil {
		t.Fatalf("last message on %s: %v", subject, err)
	}
	return m
}

// TestPublisherCarriesAHopsTrailInItsOutput: a hop's audit events ride in
// its orchestration message (the Agentbus-Trail header, in the CloudEvents
// JSON batch format) whose body stays the output's own data; publishing
// the hop again stores nothing new; a worker reading trails hands each
// audit event, in order and intact, to its handler, then runs the waits
// they deferred before it acknowledges the message. A hop with no output
// to carry its trail publishes it on the tenant's trail subject.
func TestPublisherCarriesAHopsTrailInItsOutput(t *testing.T) {
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
	if n := subjectCount(t, js, events.StreamAgent, "agent.step.finished.acme"); n != 1 {
		t.Fatalf("AGENT holds %d step.finished, want 1", n)
	}
	if n := subjectCount(t, js, events.StreamAgent, events.TrailSubject("acme")); n != 0 {
		t.Fatalf("AGENT holds %d trails of their own, want the trail in the output", n)
	}
	m := lastMsg(t, js, events.StreamAgent, "agent.step.finished.acme")
	if !bytes.Equal(m.Data, outs[0].Data()) || m.Header.Get(events.HeaderTrail) == "" {
		t.Fatalf("the output's body %s and trail %q, want its own data and the trail", m.Data, m.Header.Get(events.HeaderTrail))
	}
	if ev, err := events.FromMsg(m.Header, m.Data); err != nil || ev.ID() != outs[0].ID() {
		t.Fatalf("the output decodes as %v (%v), want itself", ev, err)
	}
	// A hop whose only outputs are audit events: their own message.
	alone := hopOutputs(t, stepRequest(t, "acme", "run-1b", 1))[1:]
	if err := pub.PublishAll(testCtx(t), alone); err != nil {
		t.Fatal(err)
	}
	if n := subjectCount(t, js, events.StreamAgent, events.TrailSubject("acme")); n != 1 {
		t.Fatalf("AGENT holds %d trails of their own, want 1", n)
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
			t.Errorf("%s: not deferred inside a trail", id)
		}
		return nil, nil
	}
	startWorker(t, js, roleProjector, h, events.WorkerConfig{Trails: true})
	eventually(t, waitLong, "the trails handled and acked", func() bool { return settled(t, js, roleProjector) })
	mu.Lock()
	defer mu.Unlock()
	// The two messages may be handled at once; each one's events come in
	// its order.
	byRun := func(evs []event.Event, run string) []event.Event {
		return slices.DeleteFunc(slices.Clone(evs), func(e event.Event) bool { return events.MetaOf(e).Run != run })
	}
	if len(got) != len(outs)-1+len(alone) {
		t.Fatalf("handled %d events, want %d", len(got), len(outs)-1+len(alone))
	}
	for run, want := range map[string][]event.Event{"run-1": outs[1:], "run-1b": alone} {
		handled := byRun(got, run)
		if len(handled) != len(want) {
			t.Fatalf("%s: handled %d events, want %d", run, len(handled), len(want))
		}
		for i, ev := range handled {
			var a, b events.Audit
			if ev.ID() != want[i].ID() || ev.Type() != want[i].Type() || events.MetaOf(ev) != events.MetaOf(want[i]) || !ev.Time().Equal(want[i].Time()) ||
				events.Decode(ev, &a) != nil || events.Decode(want[i], &b) != nil || a.PlanID != b.PlanID {
				t.Errorf("%s event %d: %s %s %+v, want %s %s %+v", run, i, ev.ID(), ev.Type(), events.MetaOf(ev), want[i].ID(), want[i].Type(), events.MetaOf(want[i]))
			}
		}
	}
	var handledIDs []string
	for _, ev := range got {
		handledIDs = append(handledIDs, ev.ID())
	}
	slices.Sort(handledIDs)
	slices.Sort(waited)
	if !slices.Equal(waited, handledIDs) {
		t.Fatalf("waits ran for %v, want the handled events' %v", waited, handledIDs)
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
	startWorker(t, js, roleProjector, h, events.WorkerConfig{Backoff: []time.Duration{10 * time.Millisecond}, Trails: true})
	if err := events.NewPublisher(js).PublishAll(testCtx(t), hopOutputs(t, stepRequest(t, "acme", "run-2", 1))); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "the batch retried and acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls == 6 && settled(t, js, roleProjector)
	})

	forged := nats.NewMsg(events.TrailSubject("acme"))
	forged.Header.Set("content-type", events.ContentTypeBatch)
	other := hopOutputs(t, stepRequest(t, "beta", "run-3", 1))[1]
	b, _ := other.MarshalJSON()
	forged.Data = []byte("[" + string(b) + "]")
	broken := nats.NewMsg(events.TrailSubject("acme"))
	broken.Header.Set("content-type", events.ContentTypeBatch)
	broken.Data = []byte(`[{"specversion":"1.0"}]`)
	// A trail in an output's header that names another tenant.
	carrier, err := events.ToMsg(stepRequest(t, "acme", "run-4", 1))
	if err != nil {
		t.Fatal(err)
	}
	carrier.Header.Set(events.HeaderTrail, "["+string(b)+"]")
	for _, m := range []*nats.Msg{forged, broken, carrier} {
		if _, err := js.PublishMsg(testCtx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, waitLong, "the three dead-lettered", func() bool {
		return subjectCount(t, js, events.StreamAgent, events.DeadSubject("acme")) == 3 && settled(t, js, roleProjector)
	})
	mu.Lock()
	defer mu.Unlock()
	if calls != 6 {
		t.Fatalf("the handler saw %d events, want the first batch's twice only", calls)
	}
}

// TestTrailReaderFlushesWhatCallersWaitFor: a reader that would linger a
// minute for more trails writes a batch at once when a trail holds an
// event its FlushOn names.
func TestTrailReaderFlushesWhatCallersWaitFor(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var mu sync.Mutex
	var got []string
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, events.AuditName(ev.Type()))
		return nil, nil
	}
	startWorker(t, js, roleProjector, h, events.WorkerConfig{Trails: true, Linger: time.Minute,
		FlushOn: func(ev event.Event) bool { return events.AuditName(ev.Type()) == "step_1.complete" }})
	if err := events.NewPublisher(js).PublishAll(testCtx(t), hopOutputs(t, stepRequest(t, "acme", "run-flush", 1))); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "the trail written without the minute's linger", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3 && settled(t, js, roleProjector)
	})
}

// TestTrailReaderTakesItsBacklogPastAFlush: a flush ends a batch's
// linger, not the batch: a reader that finds trails waiting takes them
// together, though every one of them would flush, so a reader that falls
// behind catches up in a few batches instead of one per flush.
func TestTrailReaderTakesItsBacklogPastAFlush(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	const hops = 20
	for i := range hops {
		if err := events.NewPublisher(js).PublishAll(testCtx(t), hopOutputs(t, stepRequest(t, "acme", fmt.Sprintf("run-%d", i), 1))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handled := 0
	batches := map[int]bool{} // the events handled when a batch's waits ran
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		mu.Lock()
		handled++
		mu.Unlock()
		events.Defer(ctx, func(context.Context) error {
			mu.Lock()
			batches[handled] = true
			mu.Unlock()
			return nil
		})
		return nil, nil
	}
	startWorker(t, js, roleProjector, h, events.WorkerConfig{Trails: true, Linger: time.Minute,
		FlushOn: func(event.Event) bool { return true }})
	eventually(t, waitLong, "every trail handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled == hops*3 && settled(t, js, roleProjector)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(batches) > hops/4 {
		t.Errorf("%d waiting trails, each flushing, handled in %d batches: want them taken together", hops, len(batches))
	}
}

// TestTrailReaderFlushesOnlyTheFlushingRun: a flush writes its own run's
// trails at once and leaves another run's, which no flush names, for a
// later batch, once they have waited the linger: a run's trails are
// written together, not once per batch its hops fell in.
func TestTrailReaderFlushesOnlyTheFlushingRun(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var mu sync.Mutex
	handled := map[string]int{}
	var order []string // the runs whose waits ran, batch by batch
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		run := events.MetaOf(ev).Run
		mu.Lock()
		handled[run]++
		mu.Unlock()
		events.Defer(ctx, func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if len(order) == 0 || order[len(order)-1] != run {
				order = append(order, run)
			}
			return nil
		})
		return nil, nil
	}
	const linger = time.Second // under the test topology's ack wait
	startWorker(t, js, roleProjector, h, events.WorkerConfig{Trails: true, Linger: linger,
		FlushOn: func(ev event.Event) bool { return events.MetaOf(ev).Run == "run-ends" }})
	pub := events.NewPublisher(js)
	if err := pub.PublishAll(testCtx(t), hopOutputs(t, stepRequest(t, "acme", "run-goes-on", 1))); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishAll(testCtx(t), hopOutputs(t, stepRequest(t, "acme", "run-ends", 1))); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "the flushing run's trail written", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) > 0
	})
	mu.Lock()
	if order[0] != "run-ends" || handled["run-goes-on"] != 0 {
		t.Errorf("first batch written: %v, with %d events of the run going on: want the flushing run's alone", order, handled["run-goes-on"])
	}
	mu.Unlock()
	eventually(t, waitLong, "the other run's trail written after the linger, and both acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled["run-goes-on"] == 3 && settled(t, js, roleProjector)
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"run-ends", "run-goes-on"}) || handled["run-ends"] != 3 {
		t.Fatalf("batches %v, events handled %v", order, handled)
	}
}
