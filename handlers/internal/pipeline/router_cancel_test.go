package pipeline

import (
	"slices"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
)

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
