package router_test

import (
	"slices"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
)

// TestRouterEndsCancelledRun: the next input of a cancelled run ends it
// USER_CANCEL, records what the input reported and dispatches nothing; its
// run.finished id derives from the run alone, so a second ending of the
// run (a redelivery that saw the cancel its first delivery did not) is the
// same message.
func TestRouterEndsCancelledRun(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	r.Cancels = handlerstest.StartCancels(t, env)
	ctx := handlerstest.Ctx(t)

	req := handlerstest.ExecRequest("run-rc", 1)
	step1 := handlerstest.StepOf(t, req.Run.Plan, 1)
	key := handlerstest.WriteMemory(t, env, req.Run, step1, "outlet_ids", handlerstest.Step1Output)
	joined := orch.GroupJoined{Run: req.Run, Group: req.Group, Results: []orch.StepResult{
		{Step: 1, TaskID: step1.TaskID, Outcome: orch.OutcomeComplete, MemoryKey: key, Validated: true}}}
	ev := handlerstest.NewEvent(t, "joined-rc", events.TypeGroupJoined, joined)
	handlerstest.CancelRun(t, r.Cancels, handlerstest.Tenant, "run-rc")

	outs := handlerstest.HandleTwice(t, func() ([]event.Event, error) { return r.Handle(ctx, ev) })
	if n := len(handlerstest.OfType(outs, events.TypeStepRequested)); n != 0 {
		t.Fatalf("a cancelled run dispatched %d steps", n)
	}
	fin := handlerstest.Only(t, outs, events.TypeRunFinished)
	res := handlerstest.Decode[orch.RunResult](t, fin)
	if res.TerminalCode != orch.CodeUserCancel || res.Status != orch.PlanFailed || res.Reason != "cancelled by "+handlerstest.User {
		t.Fatalf("run ended %s/%s (%s)", res.TerminalCode, res.Status, res.Reason)
	}
	if fin.ID() != events.DeriveID("run-rc", "run.finished") {
		t.Errorf("run.finished id %s does not derive from the run", fin.ID())
	}
	if !slices.Contains(handlerstest.AuditNames(outs), "run.cancelled") {
		t.Errorf("audits %v lack run.cancelled", handlerstest.AuditNames(outs))
	}
	p, _, err := env.Store.GetPlan(ctx, handlerstest.Tenant, req.Run.Plan.PlanID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != orch.PlanFailed || p.Steps[0].Status != orch.StepComplete || p.Steps[1].Status != orch.StepPending || !p.Steps[1].StartedAt.IsZero() {
		t.Errorf("projection %s, steps %+v: step 1's result is kept and step 2 never starts", p.Status, p.Steps)
	}

	// A cancelled run's request ends it at once: no routing model call.
	model := llmtest.New()
	r.Model = model
	handlerstest.CancelRun(t, r.Cancels, handlerstest.Tenant, "run-rc2")
	outs, err = r.Handle(ctx, handlerstest.NewEvent(t, "req-rc2", events.TypeRunRequested, handlerstest.RunRequest("run-rc2", handlerstest.RankTask)))
	if err != nil {
		t.Fatal(err)
	}
	if res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, outs, events.TypeRunFinished)); res.TerminalCode != orch.CodeUserCancel ||
		len(handlerstest.OfType(outs, events.TypePlanRequested)) != 0 || len(model.Requests()) != 0 {
		t.Errorf("cancelled request ended %s with outputs %v after %d model calls", res.TerminalCode, handlerstest.Types(outs), len(model.Requests()))
	}
}
