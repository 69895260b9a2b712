package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
)

// dispatch sends every ready step (pending, with its dependencies
// complete) as one group, or finishes the run when nothing is left.
func (r *Router) dispatch(ctx context.Context, out *outbox, run events.RunState) ([]event.Event, error) {
	ready := readySteps(run.Plan)
	if len(ready) == 0 {
		if allDone(run.Plan) {
			return r.succeed(ctx, out, run)
		}
		return r.finish(ctx, out, run, events.CodeRepeatedFailure, "no step can run: a dependency did not complete")
	}
	group := events.Group{ID: "grp-" + events.DeriveID(run.Request.RunID, fmt.Sprintf("group/%d", run.Seq)), Expected: len(ready)}
	now := r.Now().UTC()
	for _, i := range ready {
		s := &run.Plan.Steps[i]
		s.Status = events.StepRunning
		s.TaskID = "task-" + events.DeriveID(run.Request.RunID, fmt.Sprintf("task/%d/%d", s.Index, run.Plan.ReplanCount))[:13]
		s.StartedAt = now
	}
	if err := r.persist(ctx, run); err != nil {
		return nil, err
	}
	for _, i := range ready {
		s := run.Plan.Steps[i]
		out.audit(fmt.Sprintf("step_%d.started", s.Index), events.Audit{PlanID: run.Plan.PlanID, TaskID: s.TaskID, UserID: run.Request.UserID},
			map[string]any{"skills": s.Skills, "group": group.ID})
		out.emit(fmt.Sprintf("step/%d", s.Index), events.TypeStepRequested, events.StepRequest{
			Run: run, Step: s.Index, Group: group, Inputs: inputKeys(run.Plan, s),
		})
	}
	return out.result()
}

func readySteps(p events.Plan) []int {
	var ready []int
	for i, s := range p.Steps {
		if s.Status != events.StepPending {
			continue
		}
		ok := true
		for _, d := range s.DependsOn {
			if dep := findStep(p, d); dep == nil || dep.Status != events.StepComplete {
				ok = false
			}
		}
		if ok {
			ready = append(ready, i)
		}
	}
	return ready
}

func allDone(p events.Plan) bool {
	for _, s := range p.Steps {
		if s.Status != events.StepComplete && s.Status != events.StepRevised {
			return false
		}
	}
	return true
}

// findStep returns the live (not revised) step with index idx.
func findStep(p events.Plan, idx int) *events.Step {
	for i := range p.Steps {
		if p.Steps[i].Index == idx && p.Steps[i].Status != events.StepRevised {
			return &p.Steps[i]
		}
	}
	return nil
}

func inputKeys(p events.Plan, s events.Step) []string {
	var keys []string
	for _, d := range s.DependsOn {
		if dep := findStep(p, d); dep != nil && dep.MemoryKey != "" {
			keys = append(keys, dep.MemoryKey)
		}
	}
	return keys
}

// joined records a group's results, then replans a failure or dispatches
// the next steps.
func (r *Router) joined(ctx context.Context, ev event.Event) ([]event.Event, error) {
	var j events.GroupJoined
	if err := events.Decode(ev, &j); err != nil {
		return nil, err
	}
	run := j.Run
	run.Seq++
	out := outbox{in: ev}
	var failed []events.StepResult
	end := ""
	for _, res := range j.Results {
		s := findStep(run.Plan, res.Step)
		if s == nil {
			continue
		}
		run.Usage = run.Usage.Add(res.Usage)
		switch res.Outcome {
		case events.OutcomeInvalidOutput:
			end = events.CodeValidationFail
		case events.OutcomeUnavailable:
			end = events.CodeUnavailableDep
		}
		s.FinishedAt = res.FinishedAt
		lin := events.Audit{PlanID: run.Plan.PlanID, TaskID: s.TaskID, UserID: run.Request.UserID}
		if res.Outcome == events.OutcomeComplete {
			s.Status, s.MemoryKey, s.Validated = events.StepComplete, res.MemoryKey, res.Validated
			out.audit(fmt.Sprintf("step_%d.complete", s.Index), lin, map[string]any{"memory_key": res.MemoryKey})
			continue
		}
		s.Status, s.FailureReason = events.StepFailed, res.Reason
		out.audit(fmt.Sprintf("step_%d.failed", s.Index), lin, map[string]any{"outcome": res.Outcome, "reason": res.Reason})
		failed = append(failed, res)
	}
	if end != "" {
		// Replanning cannot help: the model's output stays invalid, or
		// the model is unavailable.
		return r.finish(ctx, &out, run, end, failed[0].Reason)
	}
	if len(failed) > 0 {
		return r.replan(ctx, &out, run, failed[0])
	}
	return r.dispatch(ctx, &out, run)
}

// replan asks the planner to revise the remaining steps, or ends the run
// with the structured failure once MaxReplans revisions were spent.
func (r *Router) replan(ctx context.Context, out *outbox, run events.RunState, f events.StepResult) ([]event.Event, error) {
	if run.Plan.ReplanCount >= MaxReplans {
		return r.finishDetail(ctx, out, run, events.CodeRepeatedFailure, "max replan attempts reached", map[string]any{
			"status": "failed", "reason": "max replan attempts reached",
			"completed_steps": completedSteps(run.Plan),
			"last_failure":    map[string]any{"step": f.Step, "reason": f.Reason},
		})
	}
	run.Plan.ReplanCount++
	run.Plan.Status = events.PlanReplanning
	run.Plan.ReplanHistory = append(run.Plan.ReplanHistory, events.ReplanRecord{
		Attempt: run.Plan.ReplanCount, Trigger: f.Outcome, FailedStep: f.Step, Reason: f.Reason, RevisedAt: r.Now().UTC(),
	})
	if err := r.persist(ctx, run); err != nil {
		return nil, err
	}
	lin := events.Audit{PlanID: run.Plan.PlanID, UserID: run.Request.UserID}
	out.audit("replan.triggered", lin, map[string]any{"attempt": run.Plan.ReplanCount, "failed_step": f.Step, "trigger": f.Outcome})
	out.audit("subagent_a.spawned", lin, map[string]any{"mode": "replan"})
	out.emit(fmt.Sprintf("replan/%d", run.Plan.ReplanCount), events.TypePlanRequested, events.PlanRequest{Run: run, Failure: &f})
	return out.result()
}

func completedSteps(p events.Plan) []map[string]any {
	var done []map[string]any
	for _, s := range p.Steps {
		if s.Status == events.StepComplete {
			done = append(done, map[string]any{"step": s.Index, "task": s.Task, "memory_key": s.MemoryKey})
		}
	}
	return done
}

// succeed synthesises the answer from the step outputs and ends the run.
func (r *Router) succeed(ctx context.Context, out *outbox, run events.RunState) ([]event.Event, error) {
	in := llm.SynthInput{Task: run.Request.Message}
	steps := slices.Clone(run.Plan.Steps)
	slices.SortStableFunc(steps, func(a, b events.Step) int { return a.Index - b.Index })
	for _, s := range steps {
		if s.Status != events.StepComplete {
			continue
		}
		m, err := r.Store.GetMemory(ctx, s.MemoryKey)
		if err != nil {
			return nil, fmt.Errorf("handlers: read memory %s: %w", s.MemoryKey, err)
		}
		in.Outputs = append(in.Outputs, llm.StepOutput{Step: s.Index, Task: s.Task, Value: json.RawMessage(m.Text)})
	}
	synth := r.Synthesiser
	if synth == nil {
		synth = r.Model
	}
	rec := llm.Record(synth)
	req := llm.NewRequest(llm.TaskSynthesize, in)
	var stream *replyStream
	if run.Request.Stream {
		stream = r.Replies.open(out.in, "answer")
		req.Stream = func(delta string) { stream.write(delta, false) }
	}
	resp, err := rec.Complete(ctx, req)
	if err := stream.close(ctx); err != nil {
		r.Log.Warn().Err(err).Str("run_id", run.Request.RunID).Msg("answer not streamed; the caller gets it whole")
	}
	run.Usage = run.Usage.Add(out.modelCalls(events.Audit{PlanID: run.Plan.PlanID, UserID: run.Request.UserID}, rec))
	if err != nil {
		if code, ok := modelFailure(err); ok {
			return r.finish(ctx, out, run, code, "synthesis failed: "+err.Error())
		}
		return nil, fmt.Errorf("handlers: synthesise: %w", err)
	}
	run.Plan.Status = events.PlanComplete
	return r.end(ctx, out, run, events.CodeSuccess, resp.Message.Content, "", nil)
}

// finish ends a run that failed with code and reason.
func (r *Router) finish(ctx context.Context, out *outbox, run events.RunState, code, reason string) ([]event.Event, error) {
	return r.finishDetail(ctx, out, run, code, reason, nil)
}

func (r *Router) finishDetail(ctx context.Context, out *outbox, run events.RunState, code, reason string, detail any) ([]event.Event, error) {
	run.Plan.Status = events.PlanFailed
	return r.end(ctx, out, run, code, "The task could not be completed: "+reason, reason, detail)
}

func (r *Router) end(ctx context.Context, out *outbox, run events.RunState, code, response, reason string, detail any) ([]event.Event, error) {
	run.Seq++
	run.Plan.CompletedAt = r.Now().UTC()
	if err := r.persist(ctx, run); err != nil {
		return nil, err
	}
	res := events.RunResult{
		RunID: run.Request.RunID, TenantID: run.Request.TenantID, SessionID: run.Request.SessionID,
		PlanID: run.Plan.PlanID, Status: run.Plan.Status, TerminalCode: code, Response: response, Reason: reason,
		Steps: run.Plan.Steps, Usage: run.Usage,
	}
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return nil, err
		}
		res.Detail = b
	}
	r.Credentials.Forget(ctx, run.Request.RunID)
	out.audit("run.finished", events.Audit{PlanID: run.Plan.PlanID, UserID: run.Request.UserID},
		map[string]any{"status": res.Status, "terminal_code": code, "reason": reason, "usage": run.Usage})
	out.emit("run.finished", events.TypeRunFinished, res)
	return out.result()
}

// deadLettered fails the run of a dead-lettered message, so a caller never
// waits forever for a run whose message was removed.
func (r *Router) deadLettered(ctx context.Context, ev event.Event) ([]event.Event, error) {
	var dl events.DeadLetter
	if err := events.Decode(ev, &dl); err != nil {
		return nil, err
	}
	if dl.RunID == "" {
		return nil, nil
	}
	code := events.CodeRepeatedFailure
	if events.TypeOfSubject(dl.Subject) == events.TypeRunRequested {
		code = events.CodeValidationFail
	}
	var carried struct {
		Run *events.RunState `json:"run"`
	}
	out := outbox{in: ev}
	if json.Unmarshal(dl.Original, &carried) == nil && carried.Run != nil && carried.Run.Request.RunID == dl.RunID {
		return r.finish(ctx, &out, *carried.Run, code, "message dead-lettered: "+dl.Reason)
	}
	r.Credentials.Forget(ctx, dl.RunID)
	session := ""
	if v := dl.Headers["ce-"+events.ExtSession]; len(v) > 0 {
		session = v[0]
	}
	out.emit("run.finished", events.TypeRunFinished, events.RunResult{
		RunID: dl.RunID, TenantID: events.MetaOf(ev).Tenant, SessionID: session, Status: events.PlanFailed,
		TerminalCode: code, Response: "The task could not be completed: " + dl.Reason, Reason: dl.Reason,
	})
	return out.result()
}
