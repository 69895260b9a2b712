package orch

import (
	"fmt"
	"maps"
	"slices"

	json "github.com/go-json-experiment/json/v1"
)

// Budget release (seeds 003 and 004: an operator may approve more budget
// and the run resumes). With its tenant's release setting (the budgets
// policy's release), a run that would end BUDGET_EXHAUSTED parks at a
// budget gate with its ledger instead: the limits, what it used, the
// tenant's caps and why it stopped. An operator approves an extension
// (dimensions and amounts): the amounts are added to the run's limits,
// each bounded by the tenant's cap, and the run goes on where it stopped
// (the steps the budget stopped take their turn again, the held dispatch,
// replan, plan or answer is made). Denied, or expired, the gate ends the
// run BUDGET_EXHAUSTED. The extension is recorded in the gate's record
// and in the run's approvals: a replay applies the same.

// GateBudget is the gate of a run whose budget ran out.
const GateBudget = "budget"

// DefaultMaxReleases bounds the extensions one run may be given when its
// tenant's setting names no max_releases.
const DefaultMaxReleases = 3

// What an approved budget gate resumes.
const (
	ResumeSteps     = "steps"      // the steps the budget stopped, where they stopped
	ResumeDispatch  = "dispatch"   // the dispatch the early stop held
	ResumeReplan    = "replan"     // the replan the reflection budget refused
	ResumePlan      = "plan"       // the plan whose model call the budget refused
	ResumeSynthesis = "synthesise" // the answer whose model call the budget refused
)

// BudgetStop is a budget gate's ledger: why the run stopped (the refused
// dimension and the evidence), its limits, what it used, the tenant's
// caps, and what an approved extension resumes.
type BudgetStop struct {
	Reason    string          `json:"reason"`
	Dimension Dim             `json:"dimension,omitempty"`
	Limits    Vector          `json:"limits"`
	Used      Vector          `json:"used"`
	Caps      Vector          `json:"caps,omitempty"`
	Evidence  json.RawMessage `json:"evidence,omitempty"`
	Resume    string          `json:"resume"`
}

// releases counts the extensions the run was given.
func (s State) releases() int {
	n := 0
	for _, a := range s.Approvals {
		if a.Kind == GateBudget && a.Decision == GateApproved {
			n++
		}
	}
	return n
}

// releasable reports whether the run may park at a budget gate: its
// tenant releases budgets and it has extensions left.
func (d *decision) releasable() bool {
	r := d.State.Budget.Release
	if r == nil {
		return false
	}
	limit := r.MaxReleases
	if limit == 0 {
		limit = DefaultMaxReleases
	}
	return d.State.releases() < limit
}

// budgetExhausted ends the run BUDGET_EXHAUSTED with reason and evidence,
// or, when its tenant releases budgets, parks it at a budget gate: resume
// says what an approved extension resumes, held is the failure whose
// replan it holds, stopped the steps the budget stopped.
func (d *decision) budgetExhausted(resume, reason string, evidence any, held *StepResult, stopped []StepResult) {
	if !d.releasable() {
		d.finish(CodeBudgetExhausted, reason, evidence)
		return
	}
	raw, ok := evidence.(json.RawMessage)
	if !ok {
		raw, _ = json.Marshal(evidence) // maps of strings and numbers always marshal
	}
	var refused struct {
		Dimension Dim `json:"dimension"`
	}
	_ = json.Unmarshal(raw, &refused)
	stop := &BudgetStop{Reason: reason, Dimension: refused.Dimension, Limits: maps.Clone(d.State.Budget.Limits),
		Used: d.State.Known(), Caps: d.State.Budget.Caps, Evidence: raw, Resume: resume}
	g := Gate{Kind: GateBudget, Budget: stop, Replan: held}
	for _, r := range stopped {
		s := d.State.Plan.Live(r.Step)
		s.Status, s.FailureReason = StepAwaitingGate, ""
		g.Actions = append(g.Actions, GateAction{Step: r.Step, TaskID: r.TaskID, Task: s.Task, Risk: GateBudget,
			Evidence: r.Evidence, Resume: *r.Parked})
	}
	d.audit("budget.gate_opened", "", map[string]any{"reason": reason, "dimension": refused.Dimension, "resume": resume,
		"limits": stop.Limits, "used": stop.Used, "caps": stop.Caps, "releases": d.State.releases()})
	d.openGate(g)
}

// budgetStops returns the results of a group that the budget stopped,
// each with what it resumes with, when they are all the group's
// unfinished results; nil otherwise (the run ends as it always did).
func budgetStops(results []StepResult) []StepResult {
	var out []StepResult
	for _, r := range results {
		switch {
		case r.Outcome == OutcomeComplete:
		case r.Outcome == OutcomeBudgetExhausted && r.Parked != nil && r.Parked.Call.Skill == "":
			out = append(out, r)
		default:
			return nil
		}
	}
	return out
}

// released resumes a run whose budget gate was approved: the extension
// rec records (what the caps let through) is added to its limits, and the
// held work goes on.
func (d *decision) released(g Gate, rec Approval) {
	b := &d.State.Budget
	limits := maps.Clone(b.Limits)
	for dim, x := range rec.Extension {
		limits[dim] += x
	}
	b.Limits = limits
	d.audit("budget.released", "", map[string]any{"gate_id": g.ID, "by": rec.By, "extension": rec.Extension,
		"limits": limits, "releases": d.State.releases()})
	switch g.Budget.Resume {
	case ResumeSteps:
		d.resume(g, rec)
	case ResumeReplan:
		d.revise(*g.Replan)
	case ResumePlan:
		d.State.Plan.Status = PlanPlanning
		if g.Replan != nil {
			d.State.Plan.Status = PlanReplanning
		}
		d.audit("subagent_a.spawned", "", map[string]any{"mode": "plan"})
		d.emit("plan/"+g.ID, PlanRequest{Run: d.State, Failure: g.Replan})
	case ResumeSynthesis:
		d.synthesise()
	default:
		d.dispatch()
	}
}

// pendingReplan is the failure the run's plan request revises, as its
// replan history records it; nil for the run's first plan.
func (d *decision) pendingReplan() *StepResult {
	h := d.State.Plan.ReplanHistory
	if d.State.Plan.Status != PlanReplanning || len(h) == 0 {
		return nil
	}
	last := h[len(h)-1]
	return &StepResult{Step: last.FailedStep, Outcome: last.Trigger, Reason: last.Reason}
}

// ValidateExtension checks an extension an operator approves for the
// budget b: known dimensions, finite amounts, no wall clock, and at least
// one amount the tenant's caps let through.
func ValidateExtension(b Budget, extension Vector) error {
	if err := extension.Validate(); err != nil {
		return err
	}
	if _, ok := extension[DimWallClockS]; ok {
		return fmt.Errorf("%s cannot be extended: it is the run's deadline", DimWallClockS)
	}
	granted, clamped := b.Extend(extension)
	if len(granted) == 0 {
		if len(clamped) > 0 {
			return fmt.Errorf("the tenant's caps leave nothing to add to %v", clamped)
		}
		return fmt.Errorf("name at least one dimension and a positive amount, e.g. {%q: 10}", DimToolCalls)
	}
	if i := slices.IndexFunc(clamped, func(d Dim) bool { return granted[d] == 0 }); i >= 0 {
		return fmt.Errorf("the tenant's cap leaves nothing to add to %s", clamped[i])
	}
	return nil
}
