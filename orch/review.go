package orch

import (
	"cmp"
	"slices"
	"time"

	"github.com/agentbus/agentbus/domain"
)

// Review asks the adapter whether the findings of a supervisor's lanes
// (Steps, complete, in index order) answer Task, before they are
// synthesised: seed 001's supervisor decides whether to answer or to fan
// out again. Iteration counts the run's fan-outs so far. The adapter
// feeds the answer back as Reviewed.
type Review struct {
	Task      string
	Steps     []Step
	Iteration int
}

// Reviewed: the supervisor's review of its lanes (or its failure).
// Sufficient asks for the answer; otherwise Gaps is what the findings
// leave incomplete or contradictory, for the next fan-out.
type Reviewed struct {
	Sufficient bool
	Gaps       string
	Calls      []domain.Call
	Failure    *Failure
	At         time.Time
}

func (i Reviewed) at() time.Time { return i.At }

// ReviewGapsPrefix starts the reason a re-iteration's replan carries: the
// planner shows the supervisor what follows it as the gaps to close.
const ReviewGapsPrefix = "the supervisor's review found gaps: "

// conclude asks for the answer once every step is done. A supervisor
// first reviews its lanes' findings.
func (d *decision) conclude() {
	if planMode(d.State.Pattern) != "supervise" {
		d.synthesise()
		return
	}
	r := &Review{Task: d.State.Task(), Iteration: d.State.Plan.ReplanCount + 1}
	for _, s := range d.State.Plan.Steps {
		if s.Status == StepComplete {
			r.Steps = append(r.Steps, s)
		}
	}
	slices.SortStableFunc(r.Steps, func(a, b Step) int { return cmp.Compare(a.Index, b.Index) })
	d.Review = r
}

// reviewed takes the supervisor's review: sufficient findings are
// synthesised; gaps fan out again as a replan (a reflection pass, under
// the pattern's replan limit, past which the findings are synthesised as
// they are).
func (d *decision) reviewed(in Reviewed) {
	d.modelCalls(in.Calls)
	if f := in.Failure; f != nil {
		d.budgetRefused(f)
		if f.Code == CodeBudgetExhausted {
			d.budgetExhausted(ResumeSynthesis, "review failed: "+f.Reason, f.Evidence, nil, nil)
			return
		}
		d.finish(f.Code, "review failed: "+f.Reason, f.Evidence)
		return
	}
	plan := &d.State.Plan
	limit := !in.Sufficient && plan.ReplanCount >= d.State.maxReplans()
	d.audit("supervisor.reviewed", "", map[string]any{"iteration": plan.ReplanCount + 1, "sufficient": in.Sufficient,
		"gaps": in.Gaps, "replan_limit_reached": limit})
	if in.Sufficient || limit {
		d.synthesise()
		return
	}
	last := 0
	for _, s := range plan.Steps {
		if s.Status == StepComplete {
			last = max(last, s.Index)
		}
	}
	d.revise(StepResult{Step: last, Outcome: OutcomeInsufficient, Reason: ReviewGapsPrefix + in.Gaps,
		Suggestion: "fan out new lanes that close the gaps"})
}

// Continue folds the answer to a decision's request (its Review or
// Synthesise) into it, in the same hop: the decision on the answer, after
// the audits and messages the first made.
func Continue(d Decision, answer Input) Decision {
	next := Decide(d.State, answer)
	next.Audits = append(d.Audits, next.Audits...)
	next.Emits = append(d.Emits, next.Emits...)
	return next
}
