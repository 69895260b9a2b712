package pipeline

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// startCancels returns the cancels of env's bucket, followed until the
// test ends.
func startCancels(t *testing.T, env *testEnv) *runctl.Cancels {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runctl.NewCancels(env.cancels)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

// cancelRun requests the cancel of run and waits until c has seen it.
func cancelRun(t *testing.T, c *runctl.Cancels, tenant, run string) {
	t.Helper()
	if _, err := c.Request(testCtx(t), tenant, run, runctl.Cancel{By: testUser, At: time.Now().UTC()}); err != nil {
		t.Fatalf("Request: %v", err)
	}
	waitFor(t, "the cancel of "+run, func() bool { _, ok := c.Lookup(tenant, run); return ok })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCancelsFollowTheBucket(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	c := startCancels(t, env)
	if _, ok := c.Lookup(testTenant, "run-a"); ok {
		t.Fatal("run-a cancelled before any request")
	}
	watched, release := c.Watch(ctx, testTenant, "run-a")
	defer release()

	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first, err := c.Request(ctx, testTenant, "run-a", runctl.Cancel{By: "u1", At: asked})
	if err != nil || !first {
		t.Fatalf("Request = %v, %v; want the first request recorded", first, err)
	}
	select {
	case <-watched.Done():
		if !errors.Is(context.Cause(watched), runctl.ErrRunCancelled) {
			t.Errorf("watched context ended with %v, want ErrRunCancelled", context.Cause(watched))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the work in flight of run-a was not stopped")
	}
	if got, ok := c.Lookup(testTenant, "run-a"); !ok || got.By != "u1" || !got.At.Equal(asked) {
		t.Errorf("Lookup = %+v, %v", got, ok)
	}
	if again, err := c.Request(ctx, testTenant, "run-a", runctl.Cancel{By: "u2"}); err != nil || again {
		t.Errorf("second Request = %v, %v; want the first one kept", again, err)
	}
	if _, ok := c.Lookup("acme", "run-a"); ok {
		t.Error("another tenant's run of the same id is cancelled")
	}
	if w, release := c.Watch(ctx, testTenant, "run-a"); !errors.Is(context.Cause(w), runctl.ErrRunCancelled) {
		t.Error("Watch of a cancelled run must return a cancelled context")
		release()
	}

	// Any NATS client cancels a run by writing its key, with any value.
	if _, err := env.cancels.Put(ctx, testTenant+".run-b", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run-b's cancel", func() bool { _, ok := c.Lookup(testTenant, "run-b"); return ok })
	if got, _ := c.Lookup(testTenant, "run-b"); got.At.IsZero() {
		t.Error("a cancel without a time must take its entry's")
	}

	// A process started later loads the stored cancels before it starts.
	later := startCancels(t, env)
	for _, run := range []string{"run-a", "run-b"} {
		if _, ok := later.Lookup(testTenant, run); !ok {
			t.Errorf("a Cancels started later misses %s", run)
		}
	}
	if err := env.cancels.Delete(ctx, testTenant+".run-b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run-b's cancel to be withdrawn", func() bool { _, ok := c.Lookup(testTenant, "run-b"); return !ok })

	if _, err := c.Request(ctx, testTenant, "run.*", runctl.Cancel{}); !errors.Is(err, orch.ErrInvalidRequest) {
		t.Errorf("a run id that is no subject token: err = %v", err)
	}
	var none *runctl.Cancels
	if _, ok := none.Lookup(testTenant, "run-a"); ok {
		t.Error("a nil Cancels cancels runs")
	}
}

// TestRouterEndsCancelledRun: the next input of a cancelled run ends it
// USER_CANCEL, records what the input reported and dispatches nothing; its
// run.finished id derives from the run alone, so a second ending of the
// run (a redelivery that saw the cancel its first delivery did not) is the
// same message.
func TestRouterEndsCancelledRun(t *testing.T) {
	env := newEnv(t)
	r := newTestRouter(t, env)
	r.Cancels = startCancels(t, env)
	ctx := testCtx(t)

	req := execRequest("run-rc", 1)
	step1 := stepOf(t, req.Run.Plan, 1)
	key := writeMemory(t, env, req.Run, step1, "outlet_ids", step1Output)
	joined := orch.GroupJoined{Run: req.Run, Group: req.Group, Results: []orch.StepResult{
		{Step: 1, TaskID: step1.TaskID, Outcome: orch.OutcomeComplete, MemoryKey: key, Validated: true}}}
	ev := newEvent(t, "joined-rc", events.TypeGroupJoined, joined)
	cancelRun(t, r.Cancels, testTenant, "run-rc")

	outs := handleTwice(t, func() ([]event.Event, error) { return r.Handle(ctx, ev) })
	if n := len(ofType(outs, events.TypeStepRequested)); n != 0 {
		t.Fatalf("a cancelled run dispatched %d steps", n)
	}
	fin := only(t, outs, events.TypeRunFinished)
	res := decode[orch.RunResult](t, fin)
	if res.TerminalCode != orch.CodeUserCancel || res.Status != orch.PlanFailed || res.Reason != "cancelled by "+testUser {
		t.Fatalf("run ended %s/%s (%s)", res.TerminalCode, res.Status, res.Reason)
	}
	if fin.ID() != events.DeriveID("run-rc", "run.finished") {
		t.Errorf("run.finished id %s does not derive from the run", fin.ID())
	}
	if !slices.Contains(auditNames(outs), "run.cancelled") {
		t.Errorf("audits %v lack run.cancelled", auditNames(outs))
	}
	p, _, err := env.st.GetPlan(ctx, testTenant, req.Run.Plan.PlanID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != orch.PlanFailed || p.Steps[0].Status != orch.StepComplete || p.Steps[1].Status != orch.StepPending || !p.Steps[1].StartedAt.IsZero() {
		t.Errorf("projection %s, steps %+v: step 1's result is kept and step 2 never starts", p.Status, p.Steps)
	}

	// A cancelled run's request ends it at once: no routing model call.
	model := llmtest.New()
	r.Model = model
	cancelRun(t, r.Cancels, testTenant, "run-rc2")
	outs, err = r.Handle(ctx, newEvent(t, "req-rc2", events.TypeRunRequested, runRequest("run-rc2", rankTask)))
	if err != nil {
		t.Fatal(err)
	}
	if res := decode[orch.RunResult](t, only(t, outs, events.TypeRunFinished)); res.TerminalCode != orch.CodeUserCancel ||
		len(ofType(outs, events.TypePlanRequested)) != 0 || len(model.Requests()) != 0 {
		t.Errorf("cancelled request ended %s with outputs %v after %d model calls", res.TerminalCode, types(outs), len(model.Requests()))
	}
}

// stepCalls is a SkillCaller that reports every skill call as it starts.
type stepCalls struct {
	executor.SkillCaller
	calling chan string
}

func (s stepCalls) Call(ctx context.Context, tenant, name string, args json.RawMessage, key string) ([]byte, error) {
	s.calling <- name
	return s.SkillCaller.Call(ctx, tenant, name, args, key)
}

// TestExecutorStopsCancelledStep: a skill call in flight when its run is
// cancelled is stopped at once (its effect never happens) and the step
// finishes cancelled; a turn of a run already cancelled calls neither the
// model nor a skill.
func TestExecutorStopsCancelledStep(t *testing.T) {
	const latency = 30 * time.Second
	env := newEnvWith(t, demo.Config{Latency: latency})
	calls := stepCalls{SkillCaller: env.sk, calling: make(chan string, 8)}
	x := newTestExecutor(env, offline.New(), env.toolcalls)
	x.Skills, x.Cancels = calls, startCancels(t, env)

	type handled struct {
		outs []event.Event
		err  error
	}
	done := make(chan handled, 1)
	start := time.Now()
	go func() {
		outs, err := x.Handle(testCtx(t), newEvent(t, "step-xc", events.TypeStepRequested, execRequest("run-xc", 1)))
		done <- handled{outs, err}
	}()
	select {
	case name := <-calls.calling:
		if name != demo.SkillOutletList {
			t.Fatalf("called %s", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the step never called its skill")
	}
	time.Sleep(100 * time.Millisecond) // the call reaches the Skill Service
	cancelRun(t, x.Cancels, testTenant, "run-xc")
	var h handled
	select {
	case h = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn went on after its run was cancelled")
	}
	if h.err != nil {
		t.Fatalf("Handle: %v", h.err)
	}
	if took := time.Since(start); took >= latency/2 {
		t.Fatalf("the turn took %s: it waited for the slow skill", took)
	}
	checkOutputs(t, h.outs)
	sf := finished(t, h.outs)
	if sf.Result.Outcome != orch.OutcomeCancelled || sf.Result.Reason != "run cancelled by "+testUser {
		t.Errorf("step result %+v", sf.Result)
	}
	if n := env.svc.Calls(demo.SkillOutletList); n != 0 {
		t.Errorf("outlet_list took effect %d times after the call was stopped", n)
	}

	model := llmtest.New()
	x.Model = model
	outs := handle(t, x, newEvent(t, "step-xc-2", events.TypeStepIterated, execRequest("run-xc", 1)))
	if sf := finished(t, outs); sf.Result.Outcome != orch.OutcomeCancelled {
		t.Errorf("a turn of a cancelled run ended %s", sf.Result.Outcome)
	}
	if n := len(model.Requests()); n != 0 || len(calls.calling) != 0 {
		t.Errorf("a turn of a cancelled run made %d model and %d skill calls", n, len(calls.calling))
	}
}
