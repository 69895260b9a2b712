package events_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
)

// shortTopology has a short ack wait so timing tests stay fast.
func shortTopology() events.Topology {
	t := testTopology()
	t.AckWait, t.MaxDeliver = 500*time.Millisecond, 2
	return t
}

// TestAdvisoryDeadLettersUnackedMessage: every delivery times out without
// an ack (no heartbeat), so JetStream gives up and emits MAX_DELIVERIES;
// the worker's advisory watcher dead-letters the stored message, and the
// runtime's own dead letter of the last delivery is deduplicated with it.
func TestAdvisoryDeadLettersUnackedMessage(t *testing.T) {
	t.Parallel()
	_, js := bootstrapWith(t, shortTopology())
	release := make(chan struct{})
	var calls counter
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, errTransient
	}
	w := startWorker(t, js, roleExecutor, h, events.WorkerConfig{Heartbeat: time.Hour, Backoff: []time.Duration{50 * time.Millisecond}})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	seq := publish(t, js, stepRequest(t, "acme", "run-a", 1))
	eventually(t, waitLong, "the advisory's dead letter", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") >= 1
	})
	_, dls := deadLetters(t, js, "acme")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if !strings.Contains(dl.Reason, "max deliveries") || !strings.Contains(dl.Reason, "without an ack") {
		t.Errorf("reason %q is not the advisory's", dl.Reason)
	}
	if dl.StreamSeq != seq || dl.Stream != events.StreamAgent || dl.RunID != "run-a" || dl.Deliveries != 2 {
		t.Errorf("dead letter %+v", dl)
	}

	// Let the stuck handlers return: the one holding the last delivery
	// dead-letters too, and the derived id makes that copy a duplicate.
	close(release)
	w.stop(t) // waits for the handlers and their dead letters
	if n := calls.get(); n != 2 {
		t.Errorf("handler ran %d times, want MaxDeliver = 2", n)
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.dead.acme"); n != 1 {
		t.Fatalf("%d dead letters after the handlers returned, want 1", n)
	}
	if info := consumerInfo(t, js, roleExecutor); info.NumAckPending != 0 {
		t.Fatalf("ack pending %d", info.NumAckPending)
	}
}

// TestHeartbeatKeepsLongWorkAlive: a handler three times as long as the ack
// wait runs once, because InProgress resets the ack timer.
func TestHeartbeatKeepsLongWorkAlive(t *testing.T) {
	t.Parallel()
	topo := shortTopology()
	_, js := bootstrapWith(t, topo)
	var calls counter
	ok := twoResults(&counter{})
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		select {
		case <-time.After(3 * topo.AckWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return ok(ctx, ev)
	}
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{})
	start := time.Now()
	publish(t, js, stepRequest(t, "acme", "run-h", 1))
	eventually(t, waitLong, "outputs and the input acked", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.step.finished.acme") == 2 && settled(t, js, roleExecutor)
	})
	if time.Since(start) < 3*topo.AckWait {
		t.Fatal("handler did not run for 3x the ack wait")
	}
	if n := calls.get(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if info := consumerInfo(t, js, roleExecutor); info.NumRedelivered != 0 {
		t.Fatalf("redelivered %d", info.NumRedelivered)
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.dead.acme"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

// TestGracefulDrain: cancelling Run while a handler works returns only
// after the handler's outputs are stored and its input is acked.
func TestGracefulDrain(t *testing.T) {
	t.Parallel()
	_, js := bootstrapWith(t, shortTopology())
	started := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	var sawCancel atomic.Bool
	ok := twoResults(&counter{})
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		close(started)
		<-release
		sawCancel.Store(ctx.Err() != nil)
		outs, err := ok(ctx, ev)
		finished.Store(true)
		return outs, err
	}
	w := startWorker(t, js, roleExecutor, h, events.WorkerConfig{DrainWait: 20 * time.Second})
	publish(t, js, stepRequest(t, "acme", "run-d", 1))
	select {
	case <-started:
	case <-time.After(waitLong):
		t.Fatal("handler never started")
	}

	w.cancel()
	// Run must still be waiting for the handler.
	select {
	case err := <-w.done:
		t.Fatalf("Run returned (%v) while its handler was working", err)
	case <-time.After(3 * shortTopology().AckWait):
	}
	close(release)
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatal(err)
		}
		w.done <- nil
	case <-time.After(waitLong):
		t.Fatal("Run did not return after its handler finished")
	}
	// No polling: all of it must have happened before Run returned.
	if !finished.Load() {
		t.Fatal("Run returned before the handler finished")
	}
	if sawCancel.Load() {
		t.Fatal("the handler's context was cancelled during the drain")
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.step.finished.acme"); n != 2 {
		t.Fatalf("%d outputs stored when Run returned, want 2", n)
	}
	info := consumerInfo(t, js, roleExecutor)
	if info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Fatalf("when Run returned: ack pending %d redelivered %d", info.NumAckPending, info.NumRedelivered)
	}
}

// TestGracefulDrainBufferedMessage: with Concurrency 1, a second message is
// already delivered to the worker and waits for a slot when Run is
// cancelled. Run must not return until that message is settled as well.
func TestGracefulDrainBufferedMessage(t *testing.T) {
	t.Parallel()
	_, js := bootstrapWith(t, shortTopology())
	release := make(chan struct{})
	var calls, active, done counter
	ok := twoResults(&counter{})
	h := func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		active.inc()
		defer active.n.Add(-1)
		<-release
		outs, err := ok(ctx, ev)
		done.inc()
		return outs, err
	}
	w := startWorker(t, js, roleExecutor, h, events.WorkerConfig{Concurrency: 1, DrainWait: 20 * time.Second})
	publish(t, js, stepRequest(t, "acme", "run-b", 1))
	publish(t, js, stepRequest(t, "acme", "run-b", 2))
	eventually(t, waitLong, "both messages delivered, one handled", func() bool {
		return calls.get() == 1 && consumerInfo(t, js, roleExecutor).NumAckPending == 2
	})

	w.cancel()
	close(release)
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatal(err)
		}
		w.done <- nil
	case <-time.After(waitLong):
		t.Fatal("Run did not return")
	}
	if a := active.get(); a != 0 {
		t.Fatalf("Run returned with %d handlers still running", a)
	}
	// Drain hands buffered messages to the handler: both were handled, and
	// their outputs and acks are in, before Run returned.
	if n := done.get(); n != 2 {
		t.Fatalf("%d handlers finished when Run returned, want 2", n)
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.step.finished.acme"); n != 4 {
		t.Fatalf("%d outputs stored when Run returned, want 4", n)
	}
	if info := consumerInfo(t, js, roleExecutor); info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("when Run returned: ack pending %d, pending %d", info.NumAckPending, info.NumPending)
	}
}

func TestRunStopsWhenContextAlreadyCancelled(t *testing.T) {
	t.Parallel()
	_, js := bootstrapWith(t, shortTopology())
	ctx := testCtx(t)
	cons, err := js.Consumer(ctx, events.StreamAgent, roleExecutor)
	if err != nil {
		t.Fatal(err)
	}
	w, err := events.NewWorker(ctx, js, cons, twoResults(&counter{}), events.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(cancelled) }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLong):
		t.Fatal("Run ignored a cancelled context")
	}
}

func TestRecoverMiddleware(t *testing.T) {
	h := events.Chain(func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		panic("kaboom")
	}, events.Recover())
	ev, _ := events.New("id", events.TypeStepRequested, events.Meta{Tenant: "acme"}, 1)
	outs, err := h(context.Background(), ev)
	if outs != nil || err == nil {
		t.Fatalf("outs %v err %v", outs, err)
	}
	if !events.IsPermanent(err) || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("panic error %v is not a permanent error naming the panic", err)
	}
	// Without a panic it is transparent.
	want := errors.New("plain")
	h = events.Chain(func(ctx context.Context, ev event.Event) ([]event.Event, error) { return []event.Event{ev}, want }, events.Recover())
	outs, err = h(context.Background(), ev)
	if err != want || len(outs) != 1 {
		t.Fatalf("outs %v err %v", outs, err)
	}
}

func TestRecoverMiddlewareInWorker(t *testing.T) {
	t.Parallel()
	_, js := bootstrapWith(t, shortTopology())
	var calls counter
	h := events.Chain(func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		calls.inc()
		panic("handler bug")
	}, events.Recover())
	startWorker(t, js, roleExecutor, h, events.WorkerConfig{Backoff: []time.Duration{50 * time.Millisecond}})
	publish(t, js, stepRequest(t, "acme", "run-r", 1))
	eventually(t, waitLong, "a dead letter", func() bool {
		return subjectCount(t, js, events.StreamAgent, "agent.dead.acme") == 1 && settled(t, js, roleExecutor)
	})
	_, dls := deadLetters(t, js, "acme")
	if !strings.Contains(dls[0].Reason, "handler bug") {
		t.Fatalf("reason %q", dls[0].Reason)
	}
	if n := calls.get(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestTimeoutMiddleware(t *testing.T) {
	const d = 50 * time.Millisecond
	var deadline, entered time.Time
	var hasDeadline bool
	h := events.Chain(func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		entered = time.Now()
		deadline, hasDeadline = ctx.Deadline()
		<-ctx.Done()
		return nil, ctx.Err()
	}, events.Timeout(d))
	before := time.Now()
	_, err := h(context.Background(), event.New())
	if !hasDeadline {
		t.Fatal("handler context has no deadline")
	}
	if deadline.Before(before.Add(d)) || deadline.After(entered.Add(d)) {
		t.Fatalf("deadline %v not %v after the call (%v..%v)", deadline, d, before, entered)
	}
	if !errors.Is(err, context.DeadlineExceeded) || events.IsPermanent(err) {
		t.Fatalf("overrun error %v, want a transient deadline error", err)
	}
	// A tighter outer deadline wins.
	outer, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	want, _ := outer.Deadline()
	_, _ = h(outer, event.New())
	if !deadline.Equal(want) {
		t.Fatalf("deadline %v, want the outer %v", deadline, want)
	}
}

func TestChainOrder(t *testing.T) {
	var order []string
	mw := func(name string) events.Middleware {
		return func(next events.Handler) events.Handler {
			return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
				order = append(order, name)
				return next(ctx, ev)
			}
		}
	}
	h := events.Chain(func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		order = append(order, "handler")
		return nil, nil
	}, mw("outer"), mw("inner"))
	if _, err := h(context.Background(), event.New()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "outer,inner,handler" {
		t.Fatalf("order %v", order)
	}
}
