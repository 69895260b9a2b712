package events_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

const waitLong = 20 * time.Second

// twoResults is a handler that emits two step.finished children.
func twoResults(calls *counter) events.Handler {
	return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		var req stepMsg
		if err := events.Decode(ev, &req); err != nil {
			return nil, err
		}
		var outs []event.Event
		for _, key := range []string{"a", "b"} {
			out, err := events.Child(ev, key, events.TypeStepFinished, resultMsg{
				Result: stepResult{Step: req.Step, TaskID: key, Outcome: "complete"},
			})
			if err != nil {
				return nil, err
			}
			outs = append(outs, out)
		}
		return outs, nil
	}
}

func TestWorkerPublishesOutputsThenAcks(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	rec := &errRecorder{}
	startWorker(t, js, roleExecutor, twoResults(&calls), events.WorkerConfig{OnError: rec.OnError})

	in := stepRequest(t, "acme", "run-1", 4)
	publish(t, js, in)

	const outSubject = "agent.step.finished.acme"
	eventually(t, waitLong, "two outputs and the input acked", func() bool {
		return subjectCount(t, js, events.StreamAgent, outSubject) == 2 && settled(t, js, roleExecutor)
	})
	outs := readAll(t, js, events.StreamAgent, outSubject)
	wantIDs := []string{events.DeriveID(in.ID(), "a"), events.DeriveID(in.ID(), "b")}
	for i, out := range outs {
		if out.ID() != wantIDs[i] {
			t.Errorf("output %d id %q, want %q", i, out.ID(), wantIDs[i])
		}
		if out.Type() != events.TypeStepFinished || events.MetaOf(out) != events.MetaOf(in) {
			t.Errorf("output %d: type %q meta %+v", i, out.Type(), events.MetaOf(out))
		}
		var sf resultMsg
		if err := events.Decode(out, &sf); err != nil || sf.Result.Step != 4 {
			t.Errorf("output %d data %+v %v", i, sf, err)
		}
	}
	if n := calls.get(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	info := consumerInfo(t, js, roleExecutor)
	if info.NumRedelivered != 0 || info.NumAckPending != 0 {
		t.Fatalf("consumer redelivered %d, ack pending %d", info.NumRedelivered, info.NumAckPending)
	}
	if errs := rec.all(); len(errs) != 0 {
		t.Fatalf("worker reported %v", errs)
	}
	if n := subjectCount(t, js, events.StreamAgent, events.DeadSubject("acme")); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

func TestWorkerReHandlingIsDeduplicated(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	rec := &errRecorder{}
	// Concurrency 1 so the second copy is handled after the first one's
	// outputs are stored: its publishes get duplicate PubAcks.
	startWorker(t, js, roleExecutor, twoResults(&calls), events.WorkerConfig{Concurrency: 1, OnError: rec.OnError})

	in := stepRequest(t, "acme", "run-1", 1)
	m1, err := events.ToMsg(in)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := events.ToMsg(in)
	if err != nil {
		t.Fatal(err)
	}
	// The same event stored twice, as after a redelivery or a producer
	// retry outside the duplicate window.
	m2.Header.Set(nats.MsgIdHdr, in.ID()+"-again")
	for _, m := range []*nats.Msg{m1, m2} {
		if _, err := js.PublishMsg(testCtx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.step.requested.acme"); n != 2 {
		t.Fatalf("stream holds %d inputs, want 2", n)
	}

	eventually(t, waitLong, "both inputs handled and acked", func() bool {
		return calls.get() == 2 && settled(t, js, roleExecutor)
	})
	outs := readAll(t, js, events.StreamAgent, "agent.step.finished.acme")
	if len(outs) != 2 {
		t.Fatalf("stream holds %d outputs, want one copy of each of 2", len(outs))
	}
	ids := []string{outs[0].ID(), outs[1].ID()}
	slices.Sort(ids)
	want := []string{events.DeriveID(in.ID(), "a"), events.DeriveID(in.ID(), "b")}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("output ids %v, want %v", ids, want)
	}
	if errs := rec.all(); len(errs) != 0 {
		t.Fatalf("duplicate PubAcks were reported as errors: %v", errs)
	}
	if n := subjectCount(t, js, events.StreamAgent, events.DeadSubject("acme")); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

func TestWorkerDeadLettersPoison(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	rec := &errRecorder{}
	startWorker(t, js, roleExecutor, twoResults(&calls), events.WorkerConfig{OnError: rec.OnError})

	poison := []byte("\x00\x01 not a cloud event {")
	ack, err := js.Publish(testCtx(t), "agent.step.requested.acme", poison)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "a dead letter", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") == 1
	})
	evs, dls := deadLetters(t, js, "acme")
	dl := dls[0]
	if !strings.Contains(dl.Reason, "decode") {
		t.Errorf("reason %q does not mention decode", dl.Reason)
	}
	if string(dl.Original) != string(poison) || dl.Subject != "agent.step.requested.acme" {
		t.Errorf("dead letter original %q subject %q", dl.Original, dl.Subject)
	}
	if dl.Stream != events.StreamAgent || dl.StreamSeq != ack.Sequence || dl.Deliveries != 1 {
		t.Errorf("dead letter stream %q seq %d deliveries %d, want AGENT %d 1", dl.Stream, dl.StreamSeq, dl.Deliveries, ack.Sequence)
	}
	if evs[0].ID() != events.DeriveID(fmt.Sprintf("AGENT/%d", ack.Sequence), "dead") || events.MetaOf(evs[0]).Tenant != "acme" {
		t.Errorf("dead letter id %q meta %+v", evs[0].ID(), events.MetaOf(evs[0]))
	}
	if evs[0].Source() != "agentbus/"+roleExecutor {
		t.Errorf("dead letter source %q", evs[0].Source())
	}

	// The consumer keeps serving: a valid event after the poison is handled.
	publish(t, js, stepRequest(t, "acme", "run-2", 1))
	eventually(t, waitLong, "the valid event handled", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.step.finished.acme") == 2 && settled(t, js, roleExecutor)
	})
	// The poison was terminated, not left pending: it cannot be redelivered.
	info := consumerInfo(t, js, roleExecutor)
	if info.NumAckPending != 0 || info.NumRedelivered != 0 || info.AckFloor.Stream < ack.Sequence {
		t.Fatalf("poison not terminated: ack pending %d redelivered %d ack floor %d (poison seq %d)",
			info.NumAckPending, info.NumRedelivered, info.AckFloor.Stream, ack.Sequence)
	}
	if n := calls.get(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (never for the poison)", n)
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.dead.acme"); n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
	if !rec.has("decode") {
		t.Fatalf("decode failure not reported: %v", rec.all())
	}
}

// TestWorkerDeadLettersInvalidJSONData: data that is not JSON is
// dead-lettered on its first delivery and no handler sees it, whether the
// worker checks it (a handler of its own) or leaves it to the strict
// decode of the routes its handler dispatches to (RoutesDecode).
func TestWorkerDeadLettersInvalidJSONData(t *testing.T) {
	t.Parallel()
	for _, routesDecode := range []bool{false, true} {
		t.Run(fmt.Sprintf("routes decode %v", routesDecode), func(t *testing.T) {
			t.Parallel()
			_, _, js := eventstest.Bootstrap(t, testTopology())
			var calls counter
			h := twoResults(&calls)
			if routesDecode {
				h = events.Dispatch(roleExecutor, events.On(events.TypeStepRequested, func(ctx context.Context, ev event.Event, _ stepMsg) ([]event.Event, error) {
					return twoResults(&calls)(ctx, ev)
				}))
			}
			startWorker(t, js, roleExecutor, h, events.WorkerConfig{RoutesDecode: routesDecode})

			m, err := events.ToMsg(stepRequest(t, "acme", "run-7", 1))
			if err != nil {
				t.Fatal(err)
			}
			m.Data = []byte(`{"step":`)
			if _, err := js.PublishMsg(testCtx(t), m); err != nil {
				t.Fatal(err)
			}
			eventually(t, waitLong, "a dead letter", func() bool {
				return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") == 1 && settled(t, js, roleExecutor)
			})
			_, dls := deadLetters(t, js, "acme")
			if !strings.Contains(dls[0].Reason, "decode") || dls[0].RunID != "run-7" || string(dls[0].Original) != `{"step":` {
				t.Fatalf("dead letter %+v", dls[0])
			}
			if calls.get() != 0 {
				t.Fatal("handler saw an undecodable event")
			}
		})
	}
}

func TestWorkerPermanentErrorDeadLetters(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	rec := &errRecorder{}
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		return nil, events.Permanent(errors.New("step 7 references a skill that does not exist"))
	}
	done := &doneRecorder{}
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{Backoff: []time.Duration{50 * time.Millisecond}, OnError: rec.OnError,
		OnDone: done.OnDone})

	in := stepRequest(t, "acme", "run-p", 7)
	seq := publish(t, js, in)
	eventually(t, waitLong, "a dead letter and the input settled", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") == 1 && settled(t, js, roleExecutor)
	})
	evs, dls := deadLetters(t, js, "acme")
	dl := dls[0]
	if !strings.Contains(dl.Reason, "step 7 references a skill that does not exist") {
		t.Errorf("reason %q", dl.Reason)
	}
	if dl.RunID != "run-p" || events.MetaOf(evs[0]).Run != "run-p" || dl.StreamSeq != seq || dl.Deliveries != 1 {
		t.Errorf("dead letter %+v", dl)
	}
	in2, err := events.FromMsg(dl.Headers, dl.Original)
	if err != nil || in2.ID() != in.ID() {
		t.Errorf("the dead letter does not keep the original event: %v", err)
	}
	if n := calls.get(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if info := consumerInfo(t, js, roleExecutor); info.NumRedelivered != 0 {
		t.Fatalf("a permanent failure was redelivered %d times", info.NumRedelivered)
	}
	if !rec.has("does not exist") {
		t.Fatalf("failure not reported: %v", rec.all())
	}
	if got := done.all(); !slices.Equal(got, []string{events.DeadLettered + "/0"}) {
		t.Fatalf("OnDone saw %v, want one dead letter", got)
	}
}

func TestWorkerUnpublishableOutputDeadLettersInput(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		out, err := events.New(events.DeriveID(ev.ID(), 0), events.TypeStepFinished, events.Meta{Tenant: "no.such>tenant"}, 1)
		return []event.Event{out}, err
	}
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{Backoff: []time.Duration{50 * time.Millisecond}})
	publish(t, js, stepRequest(t, "acme", "run-u", 1))
	eventually(t, waitLong, "a dead letter", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") == 1 && settled(t, js, roleExecutor)
	})
	_, dls := deadLetters(t, js, "acme")
	if !strings.Contains(dls[0].Reason, "invalid subject token") {
		t.Errorf("reason %q", dls[0].Reason)
	}
	if n := calls.get(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestWorkerTransientErrorIsRedelivered(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	rec := &errRecorder{}
	ok := twoResults(&counter{})
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		if calls.inc() == 1 {
			return nil, errTransient
		}
		return ok(ctx, ev)
	}
	done := &doneRecorder{}
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{Backoff: []time.Duration{50 * time.Millisecond}, OnError: rec.OnError,
		OnDone: done.OnDone})

	start := time.Now()
	publish(t, js, stepRequest(t, "acme", "run-t", 1))
	eventually(t, waitLong, "outputs after a retry", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.step.finished.acme") == 2 && settled(t, js, roleExecutor)
	})
	if n := calls.get(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
	// The retry came from the nak's backoff, not from the 2s ack wait.
	if elapsed := time.Since(start); elapsed >= eventstest.TestTopology().AckWait {
		t.Errorf("retry took %v: the transient error was not nak'd with the backoff", elapsed)
	}
	if info := consumerInfo(t, js, roleExecutor); info.NumRedelivered != 0 || info.NumAckPending != 0 {
		t.Fatalf("ack pending %d redelivered %d", info.NumAckPending, info.NumRedelivered)
	}
	if n := subjectCount(t, js, events.StreamAgent, events.DeadSubject("acme")); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	if !rec.has(errTransient.Error()) {
		t.Fatalf("transient failure not reported: %v", rec.all())
	}
	if got := done.all(); !slices.Equal(got, []string{events.Retried + "/0", events.Acked + "/2"}) {
		t.Fatalf("OnDone saw %v, want a retry, then an ack with its two outputs", got)
	}
}

// TestWorkerDeferredWaitOfOneEvent: a handler of a single event defers a
// wait; the worker runs it after the outputs are published and before the
// ack. A wait that fails fails the hop like a handler error: the input is
// not acked but redelivered with the backoff, and acked once the wait
// succeeds; the outputs published twice are stored once.
func TestWorkerDeferredWaitOfOneEvent(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	const outSubject = "agent.step.finished.acme"
	var calls, waits counter
	var mu sync.Mutex
	var seen []string // per wait: the outputs stored and the input's ack state when it ran
	ok := twoResults(&calls)
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		outs, err := ok(ctx, ev)
		if !events.Defer(ctx, func(ctx context.Context) error {
			n := waits.inc()
			// Not the t.Fatal helpers: this runs on the worker's goroutine.
			var stored uint64
			var pending int
			st, err := js.Stream(ctx, events.StreamAgent)
			if err == nil {
				var si *jetstream.StreamInfo
				if si, err = st.Info(ctx, jetstream.WithSubjectFilter(outSubject)); err == nil {
					stored = si.State.Subjects[outSubject]
				}
			}
			if err == nil {
				var ci *jetstream.ConsumerInfo
				if ci, err = consumerOf(ctx, js, roleExecutor); err == nil {
					pending = ci.NumAckPending
				}
			}
			mu.Lock()
			seen = append(seen, fmt.Sprintf("stored=%d ack_pending=%d err=%v", stored, pending, err))
			mu.Unlock()
			if n == 1 {
				return errTransient
			}
			return nil
		}) {
			t.Errorf("Defer reported false for a single event handled by a worker")
		}
		return outs, err
	}
	rec := &errRecorder{}
	done := &doneRecorder{}
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{Backoff: []time.Duration{50 * time.Millisecond}, OnError: rec.OnError,
		OnDone: done.OnDone})

	publish(t, js, stepRequest(t, "acme", "run-w", 1))
	eventually(t, waitLong, "the input acked after a retry", func() bool {
		return waits.get() == 2 && settled(t, js, roleExecutor)
	})
	if n := calls.get(); n != 2 {
		t.Fatalf("handler ran %d times, want 2: the failed wait must redeliver the input", n)
	}
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	// Each wait ran with the hop's outputs stored and its input not acked.
	if want := []string{"stored=2 ack_pending=1 err=<nil>", "stored=2 ack_pending=1 err=<nil>"}; !slices.Equal(got, want) {
		t.Fatalf("the waits saw %v, want %v", got, want)
	}
	if got := done.all(); !slices.Equal(got, []string{events.Retried + "/0", events.Acked + "/2"}) {
		t.Fatalf("OnDone saw %v, want a retry, then an ack with its two outputs", got)
	}
	if !rec.has(errTransient.Error()) {
		t.Fatalf("the failed wait was not reported: %v", rec.all())
	}
	if n := subjectCount(t, js, events.StreamAgent, outSubject); n != 2 {
		t.Fatalf("%d outputs stored, want 2", n)
	}
	if n := subjectCount(t, js, events.StreamAgent, events.DeadSubject("acme")); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

// consumerOf reads the info of role's consumer.
func consumerOf(ctx context.Context, js jetstream.JetStream, role string) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, streamOf(role), role)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

func TestWorkerMaxDeliveriesDeadLetters(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		return nil, errTransient
	}
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{Backoff: []time.Duration{50 * time.Millisecond}})

	seq := publish(t, js, stepRequest(t, "acme", "run-m", 1))
	eventually(t, waitLong, "a dead letter and the input settled", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") == 1 && settled(t, js, roleExecutor)
	})
	maxDeliver := eventstest.TestTopology().MaxDeliver
	if n := calls.get(); n != int64(maxDeliver) {
		t.Fatalf("handler ran %d times, want MaxDeliver = %d", n, maxDeliver)
	}
	evs, dls := deadLetters(t, js, "acme")
	dl := dls[0]
	if !strings.Contains(dl.Reason, "max deliveries") || !strings.Contains(dl.Reason, errTransient.Error()) {
		t.Errorf("reason %q", dl.Reason)
	}
	if dl.RunID != "run-m" || events.MetaOf(evs[0]).Run != "run-m" {
		t.Errorf("run id %q, meta %+v", dl.RunID, events.MetaOf(evs[0]))
	}
	if dl.Deliveries != uint64(maxDeliver) || dl.StreamSeq != seq {
		t.Errorf("deliveries %d seq %d", dl.Deliveries, dl.StreamSeq)
	}
}

// TestWorkerDoesNotDeadLetterDeadLetters: the router consumes agent.dead.*;
// a dead letter it cannot handle is terminated without another one.
func TestWorkerDoesNotDeadLetterDeadLetters(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	var calls counter
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		return nil, events.Permanent(errors.New("cannot handle"))
	}
	startWorker(t, js, roleRouter, h, events.WorkerConfig{})
	publish(t, js, events.DeadLetterEvent("executor", "AGENT", 1, 1, "agent.step.requested.acme", nil, []byte("x"), "r", false))
	eventually(t, waitLong, "the dead letter settled", func() bool {
		return calls.get() == 1 && settled(t, js, roleRouter)
	})
	if n := subjectCount(t, js, events.StreamAgent, "agent.dead.acme"); n != 1 {
		t.Fatalf("%d dead letters, want the original 1", n)
	}
	if info := consumerInfo(t, js, roleRouter); info.NumRedelivered != 0 {
		t.Fatalf("redelivered %d", info.NumRedelivered)
	}
}

// TestWorkerDeadLetterKeepsMixedCaseRunID: a foreign publisher's mixed-case
// headers decode, so its dead letter must keep the run id too.
func TestWorkerDeadLetterKeepsMixedCaseRunID(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		return nil, events.Permanent(errors.New("nope"))
	}
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{})
	m := nats.NewMsg("agent.step.requested.acme")
	m.Header["Ce-Specversion"] = []string{"1.0"}
	m.Header["Ce-Id"] = []string{"foreign-1"}
	m.Header["Ce-Type"] = []string{events.TypeStepRequested}
	m.Header["Ce-Source"] = []string{"elsewhere"}
	m.Header["Ce-Tenantid"] = []string{"acme"}
	m.Header["Ce-Runid"] = []string{"run-f"}
	m.Data = []byte(`{}`)
	if _, err := js.PublishMsg(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "a dead letter", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") == 1
	})
	_, dls := deadLetters(t, js, "acme")
	if dls[0].RunID != "run-f" {
		t.Fatalf("dead letter run id %q, want run-f", dls[0].RunID)
	}
}

// stalledFirst is a consumer whose first consumption never pulls, as the
// client library's was seen to after a cluster's leader change; later ones
// are the real consumer's.
type stalledFirst struct {
	jetstream.Consumer
	mu       sync.Mutex
	consumes int
}

func (s *stalledFirst) Consume(h jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	s.mu.Lock()
	s.consumes++
	first := s.consumes == 1
	s.mu.Unlock()
	if first {
		return &deadConsumption{closed: make(chan struct{})}, nil
	}
	return s.Consumer.Consume(h, opts...)
}

type deadConsumption struct {
	once   sync.Once
	closed chan struct{}
}

func (d *deadConsumption) Stop()                   { d.once.Do(func() { close(d.closed) }) }
func (d *deadConsumption) Drain()                  { d.Stop() }
func (d *deadConsumption) Closed() <-chan struct{} { return d.closed }

// TestWorkerConsumesAnewWhenItsConsumptionStalls: a worker whose
// consumption stopped pulling while messages wait (no pull request
// waiting on the server) stops it and consumes anew, reporting it, and
// the waiting message is handled.
func TestWorkerConsumesAnewWhenItsConsumptionStalls(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	ctx := testCtx(t)
	cons, err := js.Consumer(ctx, streamOf(roleExecutor), roleExecutor)
	if err != nil {
		t.Fatal(err)
	}
	stalled := &stalledFirst{Consumer: cons}
	var calls counter
	rec := &errRecorder{}
	runWorker(t, js, stalled, twoResults(&calls), events.WorkerConfig{OnError: rec.OnError, StallCheck: 200 * time.Millisecond})

	publish(t, js, stepRequest(t, "acme", "run-stall", 1))
	eventually(t, waitLong, "the message handled by a new consumption", func() bool {
		return calls.get() == 1 && settled(t, js, roleExecutor)
	})
	stalled.mu.Lock()
	n := stalled.consumes
	stalled.mu.Unlock()
	if n != 2 {
		t.Errorf("%d consumptions, want the stalled one and one more", n)
	}
	if !slices.ContainsFunc(rec.all(), func(err error) bool { return strings.Contains(err.Error(), "consuming anew") }) {
		t.Errorf("the restart was not reported: %v", rec.all())
	}
}

// TestWorkerTellsOfAMessageStillBeingHandled: a handler that runs past
// SlowAfter is reported once, with its event, while its heartbeats keep
// the message from redelivery; when it returns, the message is acked.
func TestWorkerTellsOfAMessageStillBeingHandled(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a message past the 2 s ack wait: make test runs it, -short does not")
	}
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	cons, err := js.Consumer(testCtx(t), streamOf(roleExecutor), roleExecutor)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var calls counter
	inner := twoResults(&calls)
	hang := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		<-release
		return inner(ctx, ev)
	}
	type slowReport struct {
		id   string
		held time.Duration
	}
	reports := make(chan slowReport, 4)
	runWorker(t, js, cons, hang, events.WorkerConfig{SlowAfter: 300 * time.Millisecond, Heartbeat: 200 * time.Millisecond,
		OnSlow: func(ev event.Event, held time.Duration) { reports <- slowReport{ev.ID(), held} }})
	in := stepRequest(t, "acme", "run-slow", 1)
	publish(t, js, in)
	select {
	case r := <-reports:
		if r.id != in.ID() || r.held < 300*time.Millisecond {
			t.Fatalf("reported %s held %s, want %s held at least 300ms", r.id, r.held, in.ID())
		}
	case <-time.After(waitLong):
		t.Fatal("a message held past SlowAfter was not reported")
	}
	time.Sleep(2500 * time.Millisecond) // past the 2 s ack wait: the heartbeats keep it
	if info := consumerInfo(t, js, roleExecutor); info.NumRedelivered != 0 || info.NumAckPending != 1 {
		t.Fatalf("while handled: %d redelivered, %d awaiting an ack; want 0 and 1", info.NumRedelivered, info.NumAckPending)
	}
	close(release)
	eventually(t, waitLong, "the message acked", func() bool { return calls.get() == 1 && settled(t, js, roleExecutor) })
	select {
	case r := <-reports:
		t.Fatalf("reported twice: %v", r)
	default:
	}
}

// TestWorkerLabelsItsHandlersProfile: a handler runs under profile labels
// naming its worker's role and its event's type, so a CPU profile of any
// process splits by hop; the labels of the worker's context are kept.
func TestWorkerLabelsItsHandlersProfile(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	type seen struct{ role, event, outer string }
	got := make(chan seen, 1)
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		role, _ := pprof.Label(ctx, "role")
		typ, _ := pprof.Label(ctx, "event")
		outer, _ := pprof.Label(ctx, "outer")
		select {
		case got <- seen{role, typ, outer}:
		default:
		}
		return nil, nil
	}
	cons, err := js.Consumer(testCtx(t), streamOf(roleExecutor), roleExecutor)
	if err != nil {
		t.Fatal(err)
	}
	w, err := events.NewWorker(testCtx(t), js, cons, h, events.WorkerConfig{DrainWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pprof.WithLabels(context.Background(), pprof.Labels("outer", "kept")))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	publish(t, js, stepRequest(t, "acme", "run-labels", 1))
	select {
	case s := <-got:
		if s.role != roleExecutor || s.event != events.TypeStepRequested || s.outer != "kept" {
			t.Errorf("labels role %q, event %q, outer %q", s.role, s.event, s.outer)
		}
	case <-time.After(waitLong):
		t.Fatal("the handler did not run")
	}
}
