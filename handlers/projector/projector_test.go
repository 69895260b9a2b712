package projector_test

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
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

func TestProjectorIndexesAuditEvents(t *testing.T) {
	env := handlerstest.NewEnv(t)
	p := &projector.Projector{Store: env.Store}
	skillEv, err := events.New("audit-1", events.AuditType("skill.called"),
		events.Meta{Tenant: handlerstest.Tenant, Session: handlerstest.Session, Run: "run-1", Task: "task-1"},
		events.Audit{PlanID: "plan-1", TaskID: "task-1", SkillID: "outlet_list", Payload: json.RawMessage(`{"is_error":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	bareEv := handlerstest.NewEvent(t, "audit-2", events.AuditType("run.finished"), events.Audit{PlanID: "plan-1"})

	// Each is handled twice, as a redelivery would: stored once.
	for _, ev := range []string{"first", "redelivery"} {
		if _, err := p.Handle(handlerstest.Ctx(t), skillEv); err != nil {
			t.Fatalf("Handle (%s): %v", ev, err)
		}
		if _, err := p.Handle(handlerstest.Ctx(t), bareEv); err != nil {
			t.Fatalf("Handle (%s): %v", ev, err)
		}
	}
	got, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, SessionID: handlerstest.Session})
	if err != nil {
		t.Fatalf("Trace: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("trace has %d events, want 2: %+v", len(got), got)
	}
	byID := map[string]store.Event{}
	for _, e := range got {
		byID[e.EventID] = e
	}
	cases := []struct {
		id, typ, skill, task, payload string
	}{
		{"audit-1", "skill.called", "outlet_list", "task-1", `{"is_error":false}`},
		{"audit-2", "run.finished", "", "", `{}`},
	}
	for _, tc := range cases {
		e, ok := byID[tc.id]
		if !ok {
			t.Errorf("event %s not in the trace", tc.id)
			continue
		}
		if e.EventType != tc.typ || e.SkillID != tc.skill || e.TaskID != tc.task || e.PlanID != "plan-1" ||
			e.TenantID != handlerstest.Tenant || e.SessionID != handlerstest.Session || e.TS.IsZero() {
			t.Errorf("event %s = %+v", tc.id, e)
		}
		handlerstest.AssertJSON(t, e.Payload, tc.payload)
	}
	byPlan, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: "plan-1"})
	if err != nil || len(byPlan) != 2 {
		t.Errorf("trace by plan = %d events, %v", len(byPlan), err)
	}
}

func TestProjectorRejects(t *testing.T) {
	env := handlerstest.NewEnv(t)
	p := &projector.Projector{Store: env.Store}
	noTenant, err := events.New("audit-nt", events.AuditType("skill.called"), events.Meta{Session: handlerstest.Session}, events.Audit{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		ev      func() error
		wantErr error
	}{
		{"no tenant", func() error { _, err := p.Handle(handlerstest.Ctx(t), noTenant); return err }, store.ErrSchema},
		{"payload not an object", func() error {
			_, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "audit-arr", events.AuditType("x.y"), events.Audit{Payload: json.RawMessage(`[1]`)}))
			return err
		}, store.ErrSchema},
		{"data not an audit", func() error {
			_, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "audit-str", events.AuditType("x.y"), "text"))
			return err
		}, events.ErrDecode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ev()
			if !errors.Is(err, tc.wantErr) || !events.IsPermanent(err) {
				t.Errorf("err = %v, want a permanent %v", err, tc.wantErr)
			}
		})
	}
}

// TestProjectorWritesPlanSnapshots feeds plan.projected events out of
// order and twice, as concurrent projector workers and redeliveries would:
// the newest snapshot wins, and none of them enters the trace.
func TestProjectorWritesPlanSnapshots(t *testing.T) {
	env := handlerstest.NewEnv(t)
	p := &projector.Projector{Store: env.Store}
	snapshot := func(version int64, status string) event.Event {
		plan := store.Plan{PlanID: "plan-snap", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, UserID: handlerstest.User,
			Status: status, CreatedAt: time.Now().UTC()}
		return handlerstest.NewEvent(t, fmt.Sprintf("snap-%d", version), events.AuditType(handlers.AuditPlanProjected),
			events.Audit{PlanID: plan.PlanID, Payload: mustJSON(t, handlers.PlanProjected{Version: version, Plan: &plan})})
	}
	for _, ev := range []event.Event{snapshot(1, store.PlanStatusPlanning), snapshot(3, store.PlanStatusComplete),
		snapshot(2, store.PlanStatusExecuting), snapshot(3, store.PlanStatusComplete), snapshot(1, store.PlanStatusPlanning)} {
		if _, err := p.Handle(handlerstest.Ctx(t), ev); err != nil {
			t.Fatalf("Handle %s: %v", ev.ID(), err)
		}
	}
	handlerstest.AssertProjection(t, env, "plan-snap", store.PlanStatusComplete, 3)
	trace, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: "plan-snap"})
	if err != nil || len(trace) != 0 {
		t.Errorf("trace = %d events (%v), want none: a snapshot is not a trace event", len(trace), err)
	}

	// A snapshot whose plan is not the event's, or of another tenant, is
	// refused for good.
	forged := []struct {
		name string
		mod  func(*handlers.PlanProjected)
	}{
		{"other plan", func(pp *handlers.PlanProjected) { pp.Plan.PlanID = "plan-other" }},
		{"other tenant", func(pp *handlers.PlanProjected) { pp.Plan.TenantID = "alpha" }},
		{"no version", func(pp *handlers.PlanProjected) { pp.Version = 0 }},
	}
	for _, tc := range forged {
		t.Run(tc.name, func(t *testing.T) {
			pp := handlers.PlanProjected{Version: 9, Plan: &store.Plan{PlanID: "plan-snap", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session,
				UserID: handlerstest.User, Status: store.PlanStatusFailed, CreatedAt: time.Now().UTC()}}
			tc.mod(&pp)
			ev := handlerstest.NewEvent(t, "forged-"+tc.name, events.AuditType(handlers.AuditPlanProjected),
				events.Audit{PlanID: "plan-snap", Payload: mustJSON(t, pp)})
			if _, err := p.Handle(handlerstest.Ctx(t), ev); !errors.Is(err, events.ErrInvalidData) || !events.IsPermanent(err) {
				t.Errorf("err = %v, want a permanent invalid-data error", err)
			}
		})
	}
	handlerstest.AssertProjection(t, env, "plan-snap", store.PlanStatusComplete, 3)
}

// TestProjectorDerivesAPlanFromItsCarrier: a plan.projected without a
// snapshot is the projection of the run state its carrier holds (the
// hop's step.requested), at its version, as the router would have
// snapshotted it. Without a carrier, or with a carrier whose state is not
// the event's plan at the event's version, it is refused for good, alone:
// an older projection of the same plan queued with it is written instead.
func TestProjectorDerivesAPlanFromItsCarrier(t *testing.T) {
	env := handlerstest.NewEnv(t)
	p := &projector.Projector{Store: env.Store}
	run := orch.RunState{Request: handlerstest.RunRequest("run-carried", handlerstest.RankTask), Seq: 4,
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 5, Calls: 2},
		Plan: orch.Plan{PlanID: "plan-carried", Status: orch.PlanExecuting, Steps: handlerstest.TwoSteps(), ReplanCount: 1,
			ReplanHistory: []orch.ReplanRecord{{Attempt: 1, Trigger: orch.OutcomeFailed, FailedStep: 1, Reason: "r", RevisedAt: time.Now().UTC()}},
			CreatedAt:     time.Now().UTC()}}
	run.Plan.Steps[0].Status, run.Plan.Steps[0].TaskID, run.Plan.Steps[0].StartedAt = orch.StepRunning, "task-1", time.Now().UTC()
	carrier := func(run orch.RunState) []byte {
		return mustJSON(t, orch.StepRequest{Run: run, Step: 1, Group: orch.Group{ID: "grp-1", Expected: 1}})
	}
	marker := func(id string, version int64) event.Event {
		return handlerstest.NewEvent(t, id, events.AuditType(handlers.AuditPlanProjected),
			events.Audit{PlanID: "plan-carried", Payload: mustJSON(t, handlers.PlanProjected{Version: version})})
	}
	ctx := events.WithCarrier(handlerstest.Ctx(t), carrier(run))
	if _, err := p.Handle(ctx, marker("carried-4", 4)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	got := handlerstest.AssertProjection(t, env, "plan-carried", store.PlanStatusExecuting, 4)
	want := handlers.Projection(run)
	if g, w := mustJSON(t, got), mustJSON(t, want); string(g) != string(w) {
		t.Fatalf("projection\n%s\nwant the router's snapshot\n%s", g, w)
	}

	if _, err := p.Handle(handlerstest.Ctx(t), marker("uncarried", 5)); !errors.Is(err, events.ErrInvalidData) || !events.IsPermanent(err) {
		t.Errorf("no carrier: err = %v, want a permanent invalid-data error", err)
	}
	other := run
	other.Plan.PlanID = "plan-other"
	other.Seq = 7
	stale := run
	stale.Seq = 6
	newer := run
	newer.Seq, newer.Plan.Status = 5, orch.PlanComplete
	cases := []struct {
		name  string
		ctx   context.Context
		ev    event.Event
		wantE bool
	}{
		{"another plan's state", events.WithCarrier(handlerstest.Ctx(t), carrier(other)), marker("forged-plan", 7), true},
		{"another seq's state", events.WithCarrier(handlerstest.Ctx(t), carrier(stale)), marker("forged-seq", 8), true},
		{"not a run state", events.WithCarrier(handlerstest.Ctx(t), []byte(`{"run":[]}`)), marker("forged-body", 9), true},
		{"the newest valid", events.WithCarrier(handlerstest.Ctx(t), carrier(newer)), marker("carried-5", 5), false},
	}
	// A write under way on a slow store, so that the cases queue up
	// behind it and are written as one batch.
	held := newHoldFirst(env.Store)
	slow := &projector.Projector{Store: held}
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	wg.Go(func() {
		blocker := handlerstest.NewEvent(t, "blocker", events.AuditType("step_1.started"), events.Audit{PlanID: "plan-carried"})
		if _, err := slow.Handle(handlerstest.Ctx(t), blocker); err != nil {
			t.Errorf("blocker: %v", err)
		}
	})
	select {
	case <-held.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the blocker was never written")
	}
	for i, tc := range cases {
		wg.Go(func() { _, errs[i] = slow.Handle(tc.ctx, tc.ev) })
	}
	handlerstest.WaitFor(t, "every case queued behind the write", func() bool { return projector.Queued(slow) == len(cases) })
	close(held.release)
	wg.Wait()
	for i, tc := range cases {
		if failed := errs[i] != nil; failed != tc.wantE || failed && !events.IsPermanent(errs[i]) {
			t.Errorf("%s: err = %v, want a permanent error: %v", tc.name, errs[i], tc.wantE)
		}
	}
	handlerstest.AssertProjection(t, env, "plan-carried", store.PlanStatusComplete, 5)
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// holdFirst is a store whose first append waits until release is closed,
// so a test can queue events behind a write under way.
type holdFirst struct {
	projector.ProjectionStore
	once    sync.Once
	held    chan struct{} // closed when the first append waits
	release chan struct{}
}

func newHoldFirst(inner projector.ProjectionStore) *holdFirst {
	return &holdFirst{ProjectionStore: inner, held: make(chan struct{}), release: make(chan struct{})}
}

func (s *holdFirst) AppendEvents(ctx context.Context, evs []store.Event) error {
	first := false
	s.once.Do(func() { first = true; close(s.held) })
	if first {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.ProjectionStore.AppendEvents(ctx, evs)
}

// handleBehindAWrite hands evs[0] to p, whose write st holds, then every
// other event at once, as a worker's concurrent handlers do; once they
// have all queued behind the held write, it lets the write go. It returns
// each event's error.
func handleBehindAWrite(t *testing.T, p *projector.Projector, st *holdFirst, evs []event.Event) []error {
	t.Helper()
	leadErr := make(chan error, 1)
	go func() { _, err := p.Handle(handlerstest.Ctx(t), evs[0]); leadErr <- err }()
	select {
	case <-st.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the first event was never written")
	}
	errs := make(chan []error, 1)
	go func() { errs <- handleAtOnce(t, p, evs[1:]) }()
	handlerstest.WaitFor(t, "every event queued behind the write", func() bool { return projector.Queued(p) == len(evs)-1 })
	close(st.release)
	return append([]error{<-leadErr}, <-errs...)
}

// countingStore counts the writes of a store.
type countingStore struct {
	projector.ProjectionStore
	appends, puts atomic.Int32
}

func (s *countingStore) AppendEvents(ctx context.Context, evs []store.Event) error {
	s.appends.Add(1)
	return s.ProjectionStore.AppendEvents(ctx, evs)
}

func (s *countingStore) PutPlan(ctx context.Context, p store.Plan, version int64) error {
	s.puts.Add(1)
	return s.ProjectionStore.PutPlan(ctx, p, version)
}

// TestProjectorGroupCommits hands the projector 40 audit events and 10
// snapshots of one plan at once, while a write is under way: every event
// is stored, the newest snapshot wins, and the store sees a few bulk
// writes, not 50.
func TestProjectorGroupCommits(t *testing.T) {
	env := handlerstest.NewEnv(t)
	st := &countingStore{ProjectionStore: newHoldFirst(env.Store)}
	held := st.ProjectionStore.(*holdFirst)
	p := &projector.Projector{Store: st}
	var evs []event.Event
	for i := range 40 {
		evs = append(evs, handlerstest.NewEvent(t, fmt.Sprintf("gc-%d", i), events.AuditType("step_1.started"), events.Audit{PlanID: "plan-gc"}))
	}
	for v := int64(1); v <= 10; v++ {
		plan := store.Plan{PlanID: "plan-gc", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, UserID: handlerstest.User,
			Status: store.PlanStatusExecuting, ReplanCount: int(v), CreatedAt: time.Now().UTC()}
		evs = append(evs, handlerstest.NewEvent(t, fmt.Sprintf("gc-snap-%d", v), events.AuditType(handlers.AuditPlanProjected),
			events.Audit{PlanID: plan.PlanID, Payload: mustJSON(t, handlers.PlanProjected{Version: v, Plan: &plan})}))
	}
	for i, err := range handleBehindAWrite(t, p, held, evs) {
		if err != nil {
			t.Fatalf("Handle %s: %v", evs[i].ID(), err)
		}
	}
	trace, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: "plan-gc"})
	if err != nil || len(trace) != 40 {
		t.Fatalf("trace holds %d events (%v), want 40", len(trace), err)
	}
	if got := handlerstest.AssertProjection(t, env, "plan-gc", store.PlanStatusExecuting, 10); got.ReplanCount != 10 {
		t.Errorf("projection replan_count %d, want the newest snapshot's 10", got.ReplanCount)
	}
	if a, w := st.appends.Load(), st.puts.Load(); a > 5 || w > 5 {
		t.Errorf("%d appends and %d plan writes for 50 events, want a few group commits", a, w)
	}
}

// handleAtOnce hands every event to p at once, as a worker's concurrent
// handlers do, and returns each one's error.
func handleAtOnce(t *testing.T, p *projector.Projector, evs []event.Event) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(evs))
	for i, ev := range evs {
		wg.Go(func() { _, errs[i] = p.Handle(handlerstest.Ctx(t), ev) })
	}
	wg.Wait()
	return errs
}

// overlapStore's plan writes each wait for the others of their batch
// (together of them, up to 5 s) and record how many were under way at
// once; a write of plan-boom panics.
type overlapStore struct {
	projector.ProjectionStore
	together      int
	mu            sync.Mutex
	inFlight, max int
	all           chan struct{} // closed once together writes are under way
}

func (s *overlapStore) PutPlan(ctx context.Context, p store.Plan, version int64) error {
	if p.PlanID == "plan-boom" {
		panic("the store broke")
	}
	s.mu.Lock()
	s.inFlight++
	s.max = max(s.max, s.inFlight)
	if s.inFlight == s.together {
		close(s.all)
	}
	s.mu.Unlock()
	select {
	case <-s.all:
	case <-time.After(5 * time.Second): // written one after the other
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	return s.ProjectionStore.PutPlan(ctx, p, version)
}

// TestProjectorWritesABatchsPlansAtOnce: the snapshots of different plans
// that queued up together are written concurrently, not one after the
// other; a write that panics fails its own snapshot's handler only, and
// the projector goes on.
func TestProjectorWritesABatchsPlansAtOnce(t *testing.T) {
	env := handlerstest.NewEnv(t)
	held := newHoldFirst(env.Store)
	st := &overlapStore{ProjectionStore: held, together: 8, all: make(chan struct{})}
	p := &projector.Projector{Store: st}
	snapshot := func(planID string) event.Event {
		plan := store.Plan{PlanID: planID, TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, UserID: handlerstest.User,
			Status: store.PlanStatusExecuting, CreatedAt: time.Now().UTC()}
		return handlerstest.NewEvent(t, "snap-"+planID, events.AuditType(handlers.AuditPlanProjected),
			events.Audit{PlanID: planID, Payload: mustJSON(t, handlers.PlanProjected{Version: 1, Plan: &plan})})
	}
	// They queue up together behind the write of another plan's event.
	evs := []event.Event{handlerstest.NewEvent(t, "ev-lead", events.AuditType("step_1.started"), events.Audit{PlanID: "plan-lead"}),
		snapshot("plan-boom")}
	for i := range 8 {
		evs = append(evs, snapshot(fmt.Sprintf("plan-%d", i)), handlerstest.NewEvent(t, fmt.Sprintf("ev-%d", i), events.AuditType("step_1.started"),
			events.Audit{PlanID: fmt.Sprintf("plan-%d", i)}))
	}
	for i, err := range handleBehindAWrite(t, p, held, evs) {
		switch {
		case i == 1 && (err == nil || !strings.Contains(err.Error(), "panicked: the store broke")):
			t.Errorf("the panicking write's handler: %v", err)
		case i != 1 && err != nil:
			t.Errorf("Handle %s: %v", evs[i].ID(), err)
		}
	}
	for i := range 8 {
		handlerstest.AssertProjection(t, env, fmt.Sprintf("plan-%d", i), store.PlanStatusExecuting, 1)
	}
	if st.max < 2 {
		t.Errorf("at most %d plan writes under way at once, want the batch's written together", st.max)
	}
	if _, err := p.Handle(handlerstest.Ctx(t), snapshot("plan-after")); err != nil {
		t.Fatalf("the projector after a panicking write: %v", err)
	}
	handlerstest.AssertProjection(t, env, "plan-after", store.PlanStatusExecuting, 1)
}

// hangingStore's appends block until their context ends, as a request
// lost in a NATS restart would, until it is healed.
type hangingStore struct {
	projector.ProjectionStore
	healed atomic.Bool
}

func (s *hangingStore) AppendEvents(ctx context.Context, evs []store.Event) error {
	if !s.healed.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.ProjectionStore.AppendEvents(ctx, evs)
}

// TestProjectorBoundsAHangingWrite: a write that hangs fails after the
// write timeout, for it and for everything queued behind it, and the
// redelivered events are stored once the store answers again.
func TestProjectorBoundsAHangingWrite(t *testing.T) {
	env := handlerstest.NewEnv(t)
	st := &hangingStore{ProjectionStore: env.Store}
	p := &projector.Projector{Store: st, WriteTimeout: 100 * time.Millisecond}
	var evs []event.Event
	for i := range 8 {
		evs = append(evs, handlerstest.NewEvent(t, fmt.Sprintf("hang-%d", i), events.AuditType("step_1.started"), events.Audit{PlanID: "plan-hang"}))
	}
	handleAll := func() []error {
		errs := make([]error, len(evs))
		var wg sync.WaitGroup
		for i, ev := range evs {
			wg.Go(func() { _, errs[i] = p.Handle(handlerstest.Ctx(t), ev) })
		}
		wg.Wait()
		return errs
	}
	start := time.Now()
	for i, err := range handleAll() {
		if err == nil || events.IsPermanent(err) {
			t.Errorf("event %d: err = %v, want a transient error", i, err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the hanging write held the projector %s", took)
	}
	st.healed.Store(true)
	for i, err := range handleAll() {
		if err != nil {
			t.Fatalf("event %d after healing: %v", i, err)
		}
	}
	trace, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: "plan-hang"})
	if err != nil || len(trace) != len(evs) {
		t.Fatalf("trace holds %d events (%v), want %d", len(trace), err, len(evs))
	}
}

// hangingSessions' session writes block until their context ends.
type hangingSessions struct{ projector.ProjectionStore }

func (s hangingSessions) PutSession(ctx context.Context, _ store.Session) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestProjectorBoundsAHangingSessionWrite: session writes are serialised,
// so one that hangs (a request lost in a NATS restart) must fail after the
// write timeout, not hold every session.updated behind it for the
// handler's deadline.
func TestProjectorBoundsAHangingSessionWrite(t *testing.T) {
	env := handlerstest.NewEnv(t)
	p := &projector.Projector{Store: hangingSessions{env.Store}, WriteTimeout: 100 * time.Millisecond, Embedder: handlerstest.Embedder}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a handler's long deadline
	defer cancel()
	errs := make([]error, 4)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range errs {
		sess := store.Session{SessionID: fmt.Sprintf("s-hang-%d", i), TenantID: handlerstest.Tenant, UserID: handlerstest.User,
			Messages: []store.SessionMessage{{Role: "user", Content: "hi"}}, LastActive: time.Now().UTC()}
		up := runctl.SessionUpdated{Revision: 1, Session: sess, RunID: fmt.Sprintf("run-hang-%d", i), UserID: handlerstest.User, Message: "hi", Answer: "hello"}
		payload, _ := json.Marshal(up)
		ev := handlerstest.NewEvent(t, fmt.Sprintf("sess-hang-%d", i), events.AuditType(runctl.AuditSessionUpdated), events.Audit{Payload: payload})
		wg.Go(func() { _, errs[i] = p.Handle(ctx, ev) })
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || events.IsPermanent(err) {
			t.Errorf("session write %d: err = %v, want a transient error", i, err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("four hanging session writes held the projector %s", took)
	}
}
