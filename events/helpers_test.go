package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

// testCtx returns a context bounded well below the package time budget.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The consumers these tests run workers on.
const (
	roleRouter    = "router"
	roleExecutor  = "executor"
	roleProjector = "projector"
)

// testTopology is eventstest's with the consumers, buckets and object
// store these tests use.
func testTopology() events.Topology {
	t := eventstest.TestTopology()
	t.Consumers = []events.Consumer{
		{Name: roleRouter, Stream: events.StreamAgent,
			Filters: []string{"agent.run.requested.*", "agent.plan.proposed.*", "agent.group.joined.*", "agent.dead.*"}},
		{Name: roleExecutor, Stream: events.StreamAgent, Filters: []string{"agent.step.requested.*", "agent.step.iterated.*"}},
		{Name: roleProjector, Stream: events.StreamAgent, Filters: []string{"agent.>"}, Unlimited: true, Single: true},
	}
	t.Buckets = []events.Bucket{{Name: "fanin", TTL: events.KeepWithRuns}, {Name: "locks", TTL: time.Minute}, {Name: "config", History: 5}}
	t.ObjectStores = []events.ObjectStore{{Name: "artifacts", TTL: events.KeepWithRuns}}
	return t
}

// streamOf is the stream a test consumer reads.
func streamOf(role string) string {
	for _, c := range testTopology().Consumers {
		if c.Name == role {
			return c.Stream
		}
	}
	return ""
}

// bootstrapWith starts a fresh server and bootstraps topo on it.
func bootstrapWith(t *testing.T, topo events.Topology) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := eventstest.Server(t)
	nc, js := eventstest.Connect(t, s)
	if err := events.Bootstrap(testCtx(t), js, topo); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// stepRequest builds a step.requested input for tenant with run id run.
func stepRequest(t *testing.T, tenant, run string, step int) event.Event {
	t.Helper()
	ev, err := events.New(fmt.Sprintf("in-%s-%s-%d-%d", tenant, run, step, time.Now().UnixNano()),
		events.TypeStepRequested,
		events.Meta{Tenant: tenant, Session: "sess1", Run: run, Task: "task1", Correlation: "corr1", SourceProcess: "router-1"},
		stepMsg{Step: step, Group: groupRef{ID: "g1", Expected: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// publish publishes ev and returns its stream sequence.
func publish(t *testing.T, js jetstream.JetStream, ev event.Event) uint64 {
	t.Helper()
	m, err := events.ToMsg(ev)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.PublishMsg(testCtx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// subjectCount returns how many messages stream holds on subject.
func subjectCount(t *testing.T, js jetstream.JetStream, stream, subject string) uint64 {
	t.Helper()
	s, err := js.Stream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(testCtx(t), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// readAll decodes every message stream holds on subject, in order.
func readAll(t *testing.T, js jetstream.JetStream, stream, subject string) []event.Event {
	t.Helper()
	n := subjectCount(t, js, stream, subject)
	if n == 0 {
		return nil
	}
	ctx := testCtx(t)
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for uint64(len(out)) < n {
		batch, err := c.Fetch(int(n)-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			ev, err := events.FromMsg(m.Headers(), m.Data())
			if err != nil {
				t.Fatalf("stored message on %s does not decode: %v", subject, err)
			}
			out = append(out, ev)
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			t.Fatalf("read %d of %d messages on %s", len(out), n, subject)
		}
	}
	return out
}

// deadLetters returns the dead letters stored for tenant.
func deadLetters(t *testing.T, js jetstream.JetStream, tenant string) ([]event.Event, []events.DeadLetter) {
	t.Helper()
	evs := readAll(t, js, events.StreamAgent, events.DeadSubject(tenant))
	dls := make([]events.DeadLetter, len(evs))
	for i, ev := range evs {
		if ev.Type() != events.TypeDeadLettered {
			t.Fatalf("dead letter has type %q", ev.Type())
		}
		if err := events.Decode(ev, &dls[i]); err != nil {
			t.Fatal(err)
		}
	}
	return evs, dls
}

func consumerInfo(t *testing.T, js jetstream.JetStream, role string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := js.Consumer(testCtx(t), streamOf(role), role)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// settled reports whether role's consumer has delivered every message and
// has none awaiting an ack.
func settled(t *testing.T, js jetstream.JetStream, role string) bool {
	info := consumerInfo(t, js, role)
	return info.NumPending == 0 && info.NumAckPending == 0
}

// errRecorder records what a worker reports through OnError.
type errRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *errRecorder) OnError(_ *event.Event, subject string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Errorf("%s: %w", subject, err))
}

func (r *errRecorder) all() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// doneRecorder records WorkerConfig.OnDone: each message's outcome and
// how many outputs it stored.
type doneRecorder struct {
	mu   sync.Mutex
	done []string // "<outcome>/<outputs>"
}

func (r *doneRecorder) OnDone(_ *event.Event, outs []event.Event, outcome string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, fmt.Sprintf("%s/%d", outcome, len(outs)))
}

func (r *doneRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.done...)
}

func (r *errRecorder) has(substr string) bool {
	for _, err := range r.all() {
		if strings.Contains(err.Error(), substr) {
			return true
		}
	}
	return false
}

// runningWorker is a Worker.Run in a goroutine.
type runningWorker struct {
	cancel context.CancelFunc
	done   chan error
}

// stop cancels Run and waits for it to return.
func (w *runningWorker) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		w.done <- nil // keep stop idempotent
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// startWorker runs h on the durable consumer of role until the test ends.
func startWorker(t *testing.T, js jetstream.JetStream, role string, h events.Handler, cfg events.WorkerConfig) *runningWorker {
	t.Helper()
	cons, err := js.Consumer(testCtx(t), streamOf(role), role)
	if err != nil {
		t.Fatal(err)
	}
	return runWorker(t, js, cons, h, cfg)
}

// runWorker runs h on cons (a role's consumer, or one wrapping it) until
// the test ends.
func runWorker(t *testing.T, js jetstream.JetStream, cons jetstream.Consumer, h events.Handler, cfg events.WorkerConfig) *runningWorker {
	t.Helper()
	if cfg.DrainWait == 0 {
		cfg.DrainWait = 5 * time.Second
	}
	w, err := events.NewWorker(testCtx(t), js, cons, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	rw := &runningWorker{cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(runCtx) }()
	t.Cleanup(func() { rw.stop(t) })
	return rw
}

// counter counts handler calls.
type counter struct{ n atomic.Int64 }

func (c *counter) inc() int64 { return c.n.Add(1) }
func (c *counter) get() int64 { return c.n.Load() }

var errTransient = errors.New("dependency unavailable")

// The tests exercise the transport with payloads of their own: the
// domain's payloads (package orch) validate far more than these tests need.
type (
	groupRef struct {
		ID       string `json:"id"`
		Expected int    `json:"expected"`
	}
	stepMsg struct {
		Step   int      `json:"step"`
		Group  groupRef `json:"group"`
		Inputs []string `json:"inputs,omitempty"`
	}
	stepResult struct {
		Step    int    `json:"step"`
		TaskID  string `json:"task_id"`
		Outcome string `json:"outcome"`
	}
	resultMsg struct {
		Result stepResult `json:"result"`
	}
)
