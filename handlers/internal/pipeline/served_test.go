package pipeline

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/orch"
)

// served is a flow's router, planner, executor and aggregator served as a
// deployment serves them: each a worker on its own durable consumer of a
// real JetStream (filters derived from its routes), behind the recover
// and timeout middleware, so that a failed hop is redelivered by the
// broker, or dead-lettered, as in production. It counts how often each
// event reached its handler and how each delivery ended.
type served struct {
	mu       sync.Mutex
	calls    map[string]int    // event id → deliveries that reached its handler
	ends     map[string]int    // event id → deliveries that ended (OnDone)
	types    map[string]string // event id → its type
	outcomes map[string]int    // "<type> <outcome>" → deliveries
	stored   []event.Event     // the outputs of acked deliveries
	finished chan orch.RunResult
}

// servedBackoff is the redelivery delay of a transient failure: short, so
// that a run a retry saves ends quickly.
const servedBackoff = 50 * time.Millisecond

// serve starts f's roles as workers on env's JetStream until the test ends.
func serve(t *testing.T, env *handlerstest.Env, f *flow) *served {
	t.Helper()
	s := &served{calls: map[string]int{}, ends: map[string]int{}, types: map[string]string{}, outcomes: map[string]int{}, finished: make(chan orch.RunResult, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	roles := []struct {
		name   string
		routes []events.Route
		handle events.Handler
	}{
		{handlers.RoleRouter, f.router.Routes(), f.router.Handle},
		{handlers.RolePlanner, f.planner.Routes(), f.planner.Handle},
		{handlers.RoleExecutor, f.exec.Routes(), f.exec.Handle},
		{handlers.RoleAggregator, f.agg.Routes(), f.agg.Handle},
	}
	for _, r := range roles {
		c := events.Consumer{Name: r.name, Stream: events.StreamAgent}
		for _, rt := range r.routes {
			if !slices.Contains(c.Filters, rt.Filter()) {
				c.Filters = append(c.Filters, rt.Filter())
			}
		}
		cons, err := events.EnsureConsumer(ctx, env.JS, c, handlerstest.Topology())
		if err != nil {
			t.Fatalf("consumer %s: %v", r.name, err)
		}
		h := events.Chain(s.counting(r.handle), events.Recover(), events.Timeout(20*time.Second))
		w, err := events.NewWorker(ctx, env.JS, cons, h, events.WorkerConfig{Role: r.name,
			Backoff: []time.Duration{servedBackoff}, OnDone: s.done})
		if err != nil {
			t.Fatalf("worker %s: %v", r.name, err)
		}
		wg.Go(func() { _ = w.Run(ctx) })
	}
	return s
}

// counting counts each delivery that reaches h.
func (s *served) counting(h events.Handler) events.Handler {
	return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		s.mu.Lock()
		s.calls[ev.ID()]++
		s.types[ev.ID()] = ev.Type()
		s.mu.Unlock()
		return h(ctx, ev)
	}
}

// done records how a delivery ended, and the result of a run.finished
// an acked one stored.
func (s *served) done(ev *event.Event, outs []event.Event, outcome string, _ time.Duration) {
	typ := "undecoded"
	if ev != nil {
		typ = ev.Type()
	}
	s.mu.Lock()
	if ev != nil {
		s.ends[ev.ID()]++
	}
	s.outcomes[typ+" "+outcome]++
	s.stored = append(s.stored, outs...)
	s.mu.Unlock()
	for _, o := range outs {
		var res orch.RunResult
		if o.Type() == events.TypeRunFinished && events.Decode(o, &res) == nil {
			s.finished <- res
		}
	}
}

// run publishes the request of run runID by tenant and waits at most
// within for its result.
func (s *served) run(t *testing.T, env *handlerstest.Env, tenant, runID, task string, within time.Duration) orch.RunResult {
	t.Helper()
	req := handlerstest.RunRequest(runID, task)
	req.TenantID = tenant
	ev, err := events.New(runID, events.TypeRunRequested, events.Meta{Tenant: tenant, Session: req.SessionID, Run: runID}, req)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := events.Publish(handlerstest.Ctx(t), env.JS, ev); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-s.finished:
		if took := time.Since(start); took > within {
			t.Errorf("the run took %s to end, want at most %s", took.Round(time.Millisecond), within)
		}
		return res
	case <-time.After(30 * time.Second):
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Fatalf("run %s did not end within 30 s; deliveries ended %v", runID, s.outcomes)
		return orch.RunResult{}
	}
}

// deliveries is how often events of typ reached their handler, each
// event once per delivery.
func (s *served) deliveries(typ string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n []int
	for id, c := range s.calls {
		if s.types[id] == typ {
			n = append(n, c)
		}
	}
	return n
}

// ended is how many deliveries of typ ended with outcome.
func (s *served) ended(typ, outcome string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outcomes[typ+" "+outcome]
}

// assertEachDeliveredOnce asserts that every event reached its handler
// on its first delivery only, and that no delivery was retried or
// dead-lettered.
func (s *served) assertEachDeliveredOnce(t *testing.T) {
	t.Helper()
	s.settle(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.calls {
		if n != 1 {
			t.Errorf("%s %s reached its handler %d times, want once", s.types[id], id, n)
		}
	}
	for k, n := range s.outcomes {
		if k[len(k)-len(events.Acked):] != events.Acked {
			t.Errorf("%d deliveries ended %q, want every one acked", n, k)
		}
	}
}

// audits are the payloads of the stored audit events named name.
func (s *served) audits(t *testing.T, name string) []map[string]any {
	t.Helper()
	s.settle(t)
	s.mu.Lock()
	stored := slices.Clone(s.stored)
	s.mu.Unlock()
	return handlerstest.AuditPayloads(t, stored, name)
}

// settle waits until every delivery that reached a handler has ended:
// a run's result can reach the test before the worker of an earlier hop
// (whose outputs led to it) has reported its own end, and its outputs.
func (s *served) settle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		open := 0
		for id, n := range s.calls {
			if s.ends[id] < n {
				open++
			}
		}
		s.mu.Unlock()
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still open after 5 s", open)
		}
	}
}
