package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/runctl"
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
		return t.repair(content, err, "Answer again with a valid JSON step result only.")
	}
	lin := t.lineage()
	switch a.Status {
	case "insufficient":
		t.out.Audit("subagent.insufficient", lin, map[string]any{"reason": a.Reason, "suggestion": a.Suggestion})
		return t.finish(orch.StepResult{Outcome: orch.OutcomeInsufficient, Reason: a.Reason, Suggestion: a.Suggestion})
	case "failed":
		return t.finish(orch.StepResult{Outcome: orch.OutcomeFailed, Reason: a.Reason, Suggestion: a.Suggestion})
	case "conflict":
		return t.conflict(content, a)
	}
	if !t.grounded() {
		// Nothing the step observed supports the answer: it is refused,
		// never written, and the model is told to observe first.
		t.out.Audit("grounding.refused", lin, map[string]any{"step": t.step.Index, "observations": 0,
			"reason": "no tool observation in this step"})
		return t.repair(content, errUngrounded, "Call one of the step's skills and answer from what it returns.")
	}
	if missing := t.ungroundedIDs(a.Data); len(missing) > 0 {
		// Identifiers no observation of the step holds are made up.
		t.out.Audit("grounding.refused", lin, map[string]any{"step": t.step.Index, "unobserved_ids": missing,
			"reason": "identifiers in no observation or input of this step"})
		return t.repair(content, fmt.Errorf("%w: %v appear in no observation or input of this step", errUngrounded, missing),
			"Answer only with identifiers the step's skills returned.")
	}
	if t.leaksSecret(ctx, a.Data) {
		ev := map[string]any{"guard": "secret_in_output", "step": t.step.Index}
		t.out.Audit("guard.unsafe", lin, ev)
		return stop(orch.OutcomeUnsafe, "unsafe: the step's output carries a credential of the run", "", ev)
	}
	run := t.req.Run
	if c, min := a.Confidence, run.MinConfidence(); c != nil && *c < min {
		// Not accepted, so not written: the critic gives the step one
		// reflection pass on what the answer misses, then halts.
		ev := map[string]any{"step": t.step.Index, "confidence": *c, "threshold": min, "unmet": a.Reason}
		t.out.Audit("critic.low_confidence", lin, ev)
		evidence, _ := json.Marshal(ev)
		return t.finish(orch.StepResult{Outcome: orch.OutcomeLowConfidence, Confidence: c, Evidence: evidence,
			Reason:     fmt.Sprintf("the answer's confidence %g is below %g: %s", *c, min, cmp.Or(a.Reason, "no reason given")),
			Suggestion: "revise the step so that its skills can establish the answer"})
	}
	scope := memory.MemoryScope{TenantID: run.Request.TenantID, SessionID: run.Request.SessionID, TaskID: t.step.TaskID,
		UserID: run.Request.UserID, PlanID: run.Plan.PlanID, StepIndex: t.step.Index, Shared: t.req.Group.Expected > 1}
	// The write is drawn from the budget while its key is locked (in a
	// group of several); a refused draw writes nothing and releases the
	// lock it took.
	draw := func(ctx context.Context) error { return t.draw(ctx, orch.Vector{orch.DimMemoryWrites: 1}) }
	var (
		key    string
		waited time.Duration
		wait   func(context.Context) error
	)
	if !scope.Shared && t.req.Run.Plan.CarriesAlone(t.step.Index, a.Data) {
		// The run state will carry the output to every reader, so the
		// write need not be stored before the result is published: the
		// worker awaits it while the result is, and acks after both.
		key, wait, err = t.exec.Writer.StartDrawn(ctx, scope, a.Label, a.Data, t.step.ReturnSpec.Shape, draw)
	} else {
		key, waited, err = t.exec.Writer.WriteDrawn(ctx, scope, a.Label, a.Data, t.step.ReturnSpec.Shape, draw)
	}
	var cv *memory.ContractViolation
	switch {
	case errors.As(err, &cv):
		t.out.Audit("contract_violation", lin, map[string]any{"expected_shape": cv.Expected, "actual_shape": cv.Actual,
			"step_index": t.step.Index, "reason": cv.Reason})
		return t.finish(orch.StepResult{Outcome: orch.OutcomeContractViolation, Reason: cv.Error(),
			Suggestion: "revise the step so its skill output matches the return_spec"})
	case errors.Is(err, memory.ErrBadLabel):
		return t.finish(orch.StepResult{Outcome: orch.OutcomeFailed, Reason: err.Error(), Suggestion: "use a short label"})
	case err != nil:
		return err
	}
	if wait != nil && !events.Defer(ctx, wait) {
		if err := wait(ctx); err != nil {
			return err
		}
	}
	t.out.Audit("memory.written", lin, map[string]any{"key": key, "size_bytes": len(a.Data), "validated": true,
		"lock_wait_ms": waited.Milliseconds()})
	res := orch.StepResult{Outcome: orch.OutcomeComplete, MemoryKey: key, Validated: true, Confidence: a.Confidence}
	if len(a.Data) <= orch.MaxCarriedOutput {
		res.Output = a.Data // the run state may carry it (orch.Plan.Carried)
	}
	return t.finish(res)
}

// conflict finishes a step whose sources contradict each other: nothing
// is written, and the conflicting claims go to the critic as evidence. A
// conflict is one the step observed, so a step that called no skill is
// told to observe first.
func (t *turn) conflict(content string, a llm.ActOutput) error {
	if !t.grounded() {
		t.out.Audit("grounding.refused", t.lineage(), map[string]any{"step": t.step.Index, "observations": 0,
			"reason": "a source conflict with no tool observation in this step"})
		return t.repair(content, errUngrounded, "Call one of the step's skills and report only conflicts in what it returns.")
	}
	ev := map[string]any{"step": t.step.Index, "fact": a.Reason, "conflicts": a.Conflicts}
	t.out.Audit("critic.source_conflict", t.lineage(), ev)
	evidence, _ := json.Marshal(ev)
	return t.finish(orch.StepResult{Outcome: orch.OutcomeSourceConflict, Reason: "sources conflict on " + a.Reason,
		Evidence: evidence, Suggestion: "cross-check the conflicting sources with a skill that can settle the fact"})
}

// errUngrounded rejects an answer with no tool observation behind it.
var errUngrounded = errors.New("ungrounded: the answer rests on no tool observation of this step")

// repair sends an answer that was rejected back to the model with the
// reason and what to do (hint), as the step's next turn, at most
// llm.MaxRepairs times in a row; then the step ends invalid_output (or
// failed, for an ungrounded answer, so the run replans).
func (t *turn) repair(content string, verr error, hint string) error {
	if t.req.Repairs >= llm.MaxRepairs && errors.Is(verr, errUngrounded) {
		return t.finish(orch.StepResult{Outcome: orch.OutcomeFailed,
			Reason:     fmt.Sprintf("the step's answer stayed ungrounded after %d repairs: %v", llm.MaxRepairs, verr),
			Suggestion: "give the step a skill that returns what it needs, or declare it model_only"})
	}
	if t.req.Repairs >= llm.MaxRepairs {
		return t.finish(orch.StepResult{Outcome: orch.OutcomeInvalidOutput,
			Reason:     fmt.Sprintf("the step's answer stayed invalid after %d repairs: %v", llm.MaxRepairs, verr),
			Suggestion: "use a model that follows the answer schema, or simplify the step"})
	}
	t.out.Audit("output.repair_requested", t.lineage(), map[string]any{"attempt": t.req.Repairs + 1, "reason": verr.Error()})
	next := t.req
	next.Repairs++
	next.Iteration++
	next.Turns = t.compressTurns(append(slices.Clone(t.req.Turns),
		orch.Turn{Role: "assistant", Content: content},
		orch.Turn{Role: "user", Content: "Your answer was rejected: " + verr.Error() + ". " + hint}))
	t.carry(&next)
	t.out.Emit(fmt.Sprintf("turn/%d", next.Iteration), events.TypeStepIterated, next)
	return nil
}

// finish emits step.finished (step.joined for a group of one) and the
// subagent.finish audit event.
func (t *turn) finish(res orch.StepResult) error {
	res.Usage, res.Spent, res.Tools = t.spent(), t.spentSoFar(), t.toolUses()
	res.Step, res.TaskID = t.step.Index, t.step.TaskID
	res.StartedAt, res.FinishedAt = t.step.StartedAt, t.exec.Now().UTC()
	t.out.Audit("subagent.finish", t.lineage(), map[string]any{"status": res.Outcome, "memory_key": res.MemoryKey,
		"duration_ms": res.FinishedAt.Sub(res.StartedAt).Milliseconds(), "reason": res.Reason, "spent": res.Spent,
		"tool_registry_version": t.registryVersion()})
	if t.req.Group.Expected == 1 {
		// A group of one is joined by its only member: no fan-in hop.
		t.out.EmitID(handlers.JoinID(t.req.Group.ID), events.TypeStepJoined,
			orch.StepJoined{Run: t.req.Run, Group: t.req.Group, Result: res})
		return nil
	}
	t.out.Emit("finished", events.TypeStepFinished, orch.StepFinished{Run: t.req.Run, Group: t.req.Group, Result: res})
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
	c, _ := t.exec.Cancels.Lookup(t.req.Run.Request.TenantID, t.req.Run.Request.RunID)
	res := orch.StepResult{Outcome: orch.OutcomeCancelled, Reason: "run cancelled"}
	if c.By != "" {
		res.Reason += " by " + c.By
	}
	if c.Reason == runctl.CancelTimeout {
		// Stopped at the run's deadline: the run ends TIMEOUT whether or
		// not the router has seen the deadline's cancel when this joins.
		res.Outcome, res.Reason = orch.OutcomeTimedOut, "the run's deadline passed before the step finished"
	}
	if err := t.finish(res); err != nil {
		return nil, err
	}
	return t.out.Result()
}
