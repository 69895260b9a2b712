package orch

import (
	"fmt"
	"slices"
)

// The critic (seed 004) is rule-based and part of the decider: it
// verifies each proposed plan before any step of it runs, scores every
// finished step, and renders a verdict on each join (accept, retry,
// replan, escalate), recorded in the trace as a typed DecisionRecord; the
// run's last record is its result's Decision. Being in the decider, a
// replay re-derives every verdict from the recorded inputs.

// Critic verdicts.
const (
	VerdictAccept   = "accept"
	VerdictRetry    = "retry"
	VerdictReplan   = "replan"
	VerdictEscalate = "escalate"
)

// StepScore is the critic's score of one finished step: policy (1 when no
// guard stopped it) and utility (1 for a validated output, 0.5 for an
// insufficient one, 0 for a failure), with the gate it passed, if any.
type StepScore struct {
	Step     int                `json:"step_id"`
	Outcome  string             `json:"outcome"`
	Scores   map[string]float64 `json:"scores"`
	Gate     string             `json:"approval_gate,omitempty"`
	Approver string             `json:"approver,omitempty"`
}

// DecisionRecord is a critic verdict (seed 004's verdict envelope).
type DecisionRecord struct {
	RunID          string      `json:"run_id"`
	PlanID         string      `json:"plan_id"`
	Verdict        string      `json:"verdict"`
	Reason         string      `json:"reason,omitempty"`
	StepScores     []StepScore `json:"step_scores"`
	LoopGuardTrips int         `json:"loop_guard_trips"`
	ReplanAttempts int         `json:"replan_attempts"`
}

// guardOutcomes are the outcomes of a guard that stopped a step: its
// policy score is 0.
var guardOutcomes = []string{OutcomeUnsafe, OutcomePermissionDenied, OutcomeRepeatedCall, OutcomeBudgetExhausted,
	OutcomeTimedOut}

// verifyPlan checks a proposed plan before it runs: every dependency
// names an earlier step of the plan (or a completed one), no step index
// repeats, and a supervisor agent's lanes each run as one of its
// sub-agents (domain.AgentDef.LaneAgent). A plan that fails is not
// executed: the run replans with the critic's reason.
func (d *decision) verifyPlan(proposed []Step) error {
	existing, known := d.State.Plan.Steps, map[int]bool{}
	for _, s := range existing {
		if s.Status == StepComplete {
			known[s.Index] = true
		}
	}
	for _, s := range proposed {
		if known[s.Index] && !slices.ContainsFunc(existing, func(e Step) bool { return e.Index == s.Index && e.Status != StepComplete }) {
			return fmt.Errorf("step %d repeats the index of a completed or earlier step", s.Index)
		}
		for _, dep := range s.DependsOn {
			if !known[dep] {
				return fmt.Errorf("step %d depends on step %d, which is neither completed nor planned before it", s.Index, dep)
			}
		}
		if _, err := d.State.Agent.LaneAgent(s.LaneAgent()); err != nil {
			return fmt.Errorf("step %d: %w", s.Index, err)
		}
		known[s.Index] = true
	}
	return nil
}

// score is the critic's score of a finished step.
func (d *decision) score(r StepResult) StepScore {
	policy, utility := 1.0, 0.0
	switch {
	case slices.Contains(guardOutcomes, r.Outcome):
		policy = 0
	case r.Outcome == OutcomeComplete && r.Validated:
		utility = 1
	case r.Outcome == OutcomeComplete:
		utility = 0.8
	case r.Outcome == OutcomeInsufficient:
		utility = 0.5
	}
	sc := StepScore{Step: r.Step, Outcome: r.Outcome, Scores: map[string]float64{"policy": policy, "utility": utility}}
	if r.Confidence != nil {
		sc.Scores["confidence"] = *r.Confidence
	}
	for _, a := range d.State.Approvals {
		if a.Decision == GateApproved && slices.Contains(a.Steps, r.Step) {
			sc.Gate, sc.Approver = a.Gate, a.By
		}
	}
	return sc
}

// qualityPasses are the step outcomes the critic gives one pass (a
// reflection on an answer below the confidence threshold, a cross-check
// of sources that conflict) before it halts the run with their code
// (seed 003: at most one pass before escalation).
var qualityPasses = map[string]string{OutcomeLowConfidence: CodeLowConfidence, OutcomeSourceConflict: CodeSourceConflict}

// halts is the terminal code the critic halts the run with on failure f,
// or "" when f is replanned: f's outcome has a quality pass the run has
// spent already, or the run has no replan left to spend on it.
func (d *decision) halts(f StepResult) string {
	code, ok := qualityPasses[f.Outcome]
	if !ok {
		return ""
	}
	plan := d.State.Plan
	spent := slices.ContainsFunc(plan.ReplanHistory, func(r ReplanRecord) bool { return r.Trigger == f.Outcome })
	if !spent && plan.ReplanCount < d.State.maxReplans() {
		return ""
	}
	return code
}

// qualityHalt ends the run with f's quality code once its pass is spent,
// freezing the step's answer with the evidence (the confidence and what
// it misses; the conflicting sources and their claims) for review.
func (d *decision) qualityHalt(f StepResult) bool {
	code := d.halts(f)
	if code == "" {
		return false
	}
	what := "stayed below the confidence threshold after a reflection pass"
	if code == CodeSourceConflict {
		what = "found its sources still in conflict after a cross-check pass"
	}
	d.audit("critic.escalated", "", map[string]any{"code": code, "step": f.Step, "reason": f.Reason})
	d.finish(code, fmt.Sprintf("step %d %s: %s", f.Step, what, f.Reason), f.Evidence)
	return true
}

// verdict records the critic's verdict on a join: its step scores and
// what the decision does next.
func (d *decision) verdict(verdict, reason string, results []StepResult) {
	rec := DecisionRecord{RunID: d.State.Request.RunID, PlanID: d.State.Plan.PlanID, Verdict: verdict, Reason: reason,
		ReplanAttempts: d.State.Plan.ReplanCount, StepScores: []StepScore{}}
	for _, r := range results {
		rec.StepScores = append(rec.StepScores, d.score(r))
		if r.Outcome == OutcomeRepeatedCall {
			d.State.LoopGuardTrips++
		}
	}
	rec.LoopGuardTrips = d.State.LoopGuardTrips
	d.State.Verdicts = append(slices.Clone(d.State.Verdicts), rec.StepScores...)
	d.audit("critic.verdict", "", rec)
}

// finalRecord is the run's DecisionRecord: the final verdict with every
// step's last score.
func (d *decision) finalRecord(code string) *DecisionRecord {
	verdict := VerdictAccept
	if code != CodeSuccess && code != CodePartialSuccess {
		verdict = VerdictEscalate
	}
	rec := &DecisionRecord{RunID: d.State.Request.RunID, PlanID: d.State.Plan.PlanID, Verdict: verdict, Reason: code,
		LoopGuardTrips: d.State.LoopGuardTrips, ReplanAttempts: d.State.Plan.ReplanCount, StepScores: []StepScore{}}
	last := map[int]int{}
	for _, sc := range d.State.Verdicts {
		if i, ok := last[sc.Step]; ok {
			rec.StepScores[i] = sc
			continue
		}
		last[sc.Step] = len(rec.StepScores)
		rec.StepScores = append(rec.StepScores, sc)
	}
	return rec
}
