package orch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// budget resolves the run's limits from the policy (recorded in the state
// and in budget.resolved, so a replay applies the limits the run had).
func (d *decision) budget(p BudgetPolicy, lease *QuotaLease) {
	req := d.State.Request
	limits, clamped := p.Limits(req.TenantID, d.State.TaskType, d.State.PatternDef.RunTimeoutS, req.Budget)
	d.State.Budget.Limits, d.State.Budget.Escalation = limits, p.Escalation
	d.State.Budget.Caps, d.State.Budget.Release = maps.Clone(p.Tenants[req.TenantID]), p.ReleaseFor(req.TenantID)
	agent := ""
	if d.State.Agent != nil {
		agent = d.State.Agent.ID
	}
	d.State.Budget.Quotas = p.QuotasFor(req.TenantID, agent, req.SessionID)
	payload := map[string]any{"limits": limits, "requested": req.Budget, "clamped_by_tenant_caps": clamped,
		"escalation": p.Escalation}
	if r := d.State.Budget.Release; r != nil {
		payload["release"] = r
	}
	if len(d.State.Budget.Quotas) > 0 {
		payload["quotas"] = d.State.Budget.Quotas
	}
	if lease != nil {
		payload["quota_lease"] = lease
	}
	if d.State.Agent != nil {
		payload["clamped_by_agent"] = d.agentLimits()
	}
	d.audit("budget.resolved", "", payload)
}

// budgetRefused traces a model call the run's budget refused.
func (d *decision) budgetRefused(f *Failure) {
	if len(f.Evidence) > 0 {
		d.audit("budget.exhausted", "", f.Evidence)
	}
}

// earlyStop ends the run when what its budget has left is below the least
// the remaining work needs (seed 003's progressive estimate, lower bound):
// every step not yet finished needs a model call and, unless it is
// model-only, a tool call; the answer needs one more model call. The
// state knows less than the ledger (steps in flight have drawn more), so
// the estimate never stops a run that could finish.
func (d *decision) earlyStop() bool {
	limits := d.State.Budget.Limits
	if len(limits) == 0 {
		return false
	}
	need := Vector{DimModelCalls: 1}
	for _, s := range d.State.Plan.Steps {
		if s.Status != StepPending && s.Status != StepRunning {
			continue
		}
		need[DimModelCalls]++
		if !s.ModelOnly && len(s.Skills) > 0 {
			need[DimToolCalls]++
		}
	}
	known := d.State.Known()
	for _, dim := range []Dim{DimModelCalls, DimToolCalls} {
		lim, ok := limits[dim]
		if !ok || lim-known[dim] >= need[dim] {
			continue
		}
		ev := map[string]any{"dimension": dim, "remaining": lim - known[dim], "lower_bound": need[dim],
			"limits": limits, "used": known}
		d.audit("budget.early_stop", "", ev)
		d.budgetExhausted(ResumeDispatch, fmt.Sprintf("early stop: %g %s left, the remaining work needs at least %g",
			lim-known[dim], dim, need[dim]), ev, nil, nil)
		return true
	}
	return false
}

// reflectionLeft reports whether the run's budget allows one more replan
// (of failure f), and ends the run BUDGET_EXHAUSTED (or parks it at a
// budget gate holding the replan) when it does not.
func (d *decision) reflectionLeft(f StepResult) bool {
	lim, ok := d.State.Budget.Limits[DimReflectionPasses]
	if !ok || float64(d.State.Plan.ReplanCount) < lim {
		return true
	}
	ev := map[string]any{"dimension": DimReflectionPasses, "limit": lim, "used": d.State.Plan.ReplanCount,
		"limits": d.State.Budget.Limits}
	d.audit("budget.exhausted", "", ev)
	d.budgetExhausted(ResumeReplan, fmt.Sprintf("budget exhausted: %g reflection passes (replans) used", lim), ev, &f, nil)
	return false
}

// repeatsFailure ends the run REPEATED_FAILURE at once, with the
// evidence, when a failed step is a revision of a step that already
// failed the same way (same task, skills and contract, same reason): a
// replan produced the same failing step, and another would only spend
// the run's replans on it. One identical retry is allowed, since the
// first failure may have been the model's slip rather than the step's.
func (d *decision) repeatsFailure(f StepResult) bool {
	failed := d.State.Plan.Live(f.Step)
	if failed == nil {
		return false
	}
	sig := StepSignature(*failed)
	i := slices.IndexFunc(d.State.Plan.Steps, func(s Step) bool {
		return s.Index != failed.Index && s.Status == StepRevised && s.FailureReason == f.Reason && StepSignature(s) == sig
	})
	if i < 0 {
		return false
	}
	old := d.State.Plan.Steps[i]
	ev := map[string]any{"step": failed.Index, "repeats_step": old.Index, "task": failed.Task, "skills": failed.Skills,
		"signature": sig, "failure": f.Reason}
	d.audit("guard.repeated_step", "", ev)
	if f.Outcome == OutcomeInsufficient {
		// The step says what it lacks, and the revision could not supply
		// it: ask the user for it.
		d.ask(CodeMissingInfo, f.Reason, "the task needs information no replan could supply: "+f.Reason, ev, &f)
		return true
	}
	d.finish(CodeRepeatedFailure, fmt.Sprintf("step %d, a replan of step %d, failed the same way: %s", failed.Index, old.Index, f.Reason), ev)
	return true
}

// StepSignature identifies what a step does, whatever its index: its task,
// its skills and its contract.
func StepSignature(s Step) string {
	skills := slices.Clone(s.Skills)
	slices.Sort(skills)
	var shape bytes.Buffer
	if json.Compact(&shape, s.ReturnSpec.Shape) != nil {
		shape.Reset()
		shape.Write(s.ReturnSpec.Shape)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%v", strings.TrimSpace(s.Task), strings.Join(skills, ","), shape.Bytes(), s.Loop != nil)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// escalate ends a run that cannot proceed within its policy
// REVIEW_REQUIRED: the escalation event carries the packet its target
// needs (what was asked, what was done, why it stopped, the budget).
func (d *decision) escalate(e Escalation, code, reason string, detail any) {
	var done []map[string]any
	for _, s := range d.State.Plan.Steps {
		if s.Status == StepComplete {
			done = append(done, map[string]any{"step": s.Index, "task": s.Task, "memory_key": s.MemoryKey})
		}
	}
	packet := map[string]any{"target": e.Target, "code": code, "reason": reason, "task": d.State.Request.Message,
		"task_type": d.State.TaskType, "pattern": d.State.Pattern, "completed_steps": done,
		"replan_history": d.State.Plan.ReplanHistory, "evidence": detail,
		"budget": map[string]any{"limits": d.State.Budget.Limits, "used": d.State.Known()}}
	d.audit("escalation.raised", "", packet)
	d.State.Plan.Status = PlanFailed
	d.end(CodeReviewRequired, "The task needs review ("+e.Target+"): "+reason, reason, packet)
}
