package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
)

// answer handles the model's final message for the step: it self-checks
// the answer, writes it through write_memory and reports the outcome.
func (t *turn) answer(ctx context.Context, content string) error {
	var a llm.ActOutput
	err := schema.Validate(llm.ActSchema, []byte(content))
	if err == nil {
		err = json.Unmarshal([]byte(content), &a)
	}
	if err != nil {
		return t.repair(content, err)
	}
	lin := t.lineage()
	switch a.Status {
	case "insufficient":
		t.out.audit("subagent.insufficient", lin, map[string]any{"reason": a.Reason, "suggestion": a.Suggestion})
		return t.finish(orch.StepResult{Outcome: orch.OutcomeInsufficient, Reason: a.Reason, Suggestion: a.Suggestion})
	case "failed":
		return t.finish(orch.StepResult{Outcome: orch.OutcomeFailed, Reason: a.Reason, Suggestion: a.Suggestion})
	}
	run := t.req.Run
	scope := MemoryScope{TenantID: run.Request.TenantID, SessionID: run.Request.SessionID, TaskID: t.step.TaskID,
		UserID: run.Request.UserID, PlanID: run.Plan.PlanID, StepIndex: t.step.Index}
	key, waited, err := t.x.Writer.Write(ctx, scope, a.Label, a.Data, t.step.ReturnSpec.Shape)
	var cv *ContractViolation
	switch {
	case errors.As(err, &cv):
		t.out.audit("contract_violation", lin, map[string]any{"expected_shape": cv.Expected, "actual_shape": cv.Actual,
			"step_index": t.step.Index, "reason": cv.Reason})
		return t.finish(orch.StepResult{Outcome: orch.OutcomeContractViolation, Reason: cv.Error(),
			Suggestion: "revise the step so its skill output matches the return_spec"})
	case errors.Is(err, ErrBadLabel):
		return t.finish(orch.StepResult{Outcome: orch.OutcomeFailed, Reason: err.Error(), Suggestion: "use a short label"})
	case err != nil:
		return err
	}
	t.out.audit("memory.written", lin, map[string]any{"key": key, "size_bytes": len(a.Data), "validated": true,
		"lock_wait_ms": waited.Milliseconds()})
	return t.finish(orch.StepResult{Outcome: orch.OutcomeComplete, MemoryKey: key, Validated: true})
}

// repair sends an answer that is not a valid step result back to the
// model with the validation error, as the step's next turn, at most
// llm.MaxRepairs times in a row; then the step ends invalid_output.
func (t *turn) repair(content string, verr error) error {
	if t.req.Repairs >= llm.MaxRepairs {
		return t.finish(orch.StepResult{Outcome: orch.OutcomeInvalidOutput,
			Reason:     fmt.Sprintf("the step's answer stayed invalid after %d repairs: %v", llm.MaxRepairs, verr),
			Suggestion: "use a model that follows the answer schema, or simplify the step"})
	}
	t.out.audit("output.repair_requested", t.lineage(), map[string]any{"attempt": t.req.Repairs + 1, "reason": verr.Error()})
	next := t.req
	next.Repairs++
	next.Iteration++
	next.Turns = compress(append(slices.Clone(t.req.Turns),
		orch.Turn{Role: "assistant", Content: content},
		orch.Turn{Role: "user", Content: "Your answer was rejected: " + verr.Error() + ". Answer again with a valid JSON step result only."}),
		t.x.KeepTurns)
	next.Usage = t.spent()
	t.out.emit(fmt.Sprintf("turn/%d", next.Iteration), events.TypeStepIterated, next)
	return nil
}

// finish emits step.finished (step.joined for a group of one) and the
// subagent.finish audit event.
func (t *turn) finish(res orch.StepResult) error {
	res.Usage = t.spent()
	res.Step, res.TaskID = t.step.Index, t.step.TaskID
	res.StartedAt, res.FinishedAt = t.step.StartedAt, t.x.Now().UTC()
	t.out.audit("subagent.finish", t.lineage(), map[string]any{"status": res.Outcome, "memory_key": res.MemoryKey,
		"duration_ms": res.FinishedAt.Sub(res.StartedAt).Milliseconds(), "reason": res.Reason})
	if t.req.Group.Expected == 1 {
		// A group of one is joined by its only member: no fan-in hop.
		t.out.emitID(joinID(t.req.Group.ID), events.TypeStepJoined,
			orch.StepJoined{Run: t.req.Run, Group: t.req.Group, Result: res})
		return nil
	}
	t.out.emit("finished", events.TypeStepFinished, orch.StepFinished{Run: t.req.Run, Group: t.req.Group, Result: res})
	return nil
}

// skillUnavailable fails the step when an allowed skill cannot be loaded.
func (t *turn) skillUnavailable(name string, err error) error {
	return t.finish(orch.StepResult{Outcome: orch.OutcomeFailed,
		Reason: fmt.Sprintf("skill %s unavailable: %v", name, err), Suggestion: "choose another skill"})
}

// cancelled finishes the step of a cancelled run with outcome cancelled:
// the run ends USER_CANCEL at the router's next hop.
func (t *turn) cancelled() ([]event.Event, error) {
	c, _ := t.x.Cancels.Lookup(t.req.Run.Request.TenantID, t.req.Run.Request.RunID)
	reason := "run cancelled"
	if c.By != "" {
		reason += " by " + c.By
	}
	if err := t.finish(orch.StepResult{Outcome: orch.OutcomeCancelled, Reason: reason}); err != nil {
		return nil, err
	}
	return t.out.result()
}
