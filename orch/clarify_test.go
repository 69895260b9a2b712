package orch

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/domain"
)

// askingRun is a two-step run whose step 1 completed and whose step 2
// lacked a fact twice, the second time as an identical revision: the run
// asks for it.
func askingRun(t *testing.T, runID string) Decision {
	t.Helper()
	sr := started(t, runID, BudgetPolicy{}, twoSteps())
	sr = only[StepRequest](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"}}, At: t0}))
	lacks := StepResult{Step: 2, Outcome: OutcomeInsufficient, Reason: "needs a date range", Suggestion: "ask for the dates"}
	rp := only[PlanRequest](t, Decide(sr.Run, Joined{Results: []StepResult{lacks}, At: t0}))
	same := twoSteps()[1]
	same.Index = 3
	sr = only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{same}}, At: t0}))
	lacks.Step = 3
	return Decide(sr.Run, Joined{Results: []StepResult{lacks}, At: t0.Add(time.Second)})
}

func TestDecideParksAQuestionWithItsPlanAndCompletedSteps(t *testing.T) {
	d := askingRun(t, "run-ask")
	g := d.Opened
	if g == nil || g.Kind != GateClarify || d.Ended != nil || g.Question.Text != "needs a date range" || g.Replan == nil || g.Replan.Step != 3 {
		t.Fatalf("parked at %+v, ended %+v", g, d.Ended)
	}
	if s := d.State.Plan.Live(1); s == nil || s.Status != StepComplete {
		t.Fatalf("the completed step is not kept: %+v", d.State.Plan.Steps)
	}
	parked := emitted[RunParked](d)
	if len(parked) != 1 || parked[0].Gate.Question == nil || parked[0].Gate.Question.Text != "needs a date range" {
		t.Fatalf("run.parked %+v", parked)
	}
	if len(emitted[PlanRequest](d)) != 0 || len(emitted[StepRequest](d)) != 0 {
		t.Fatal("a run waiting for an answer dispatched work")
	}
}

func TestDecideResumesAnAnsweredQuestionWithAReplanThatKeepsTheCompletedSteps(t *testing.T) {
	d := askingRun(t, "run-answer")
	at := t0.Add(time.Minute)
	next := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, By: "ada", Answer: "the last 30 days",
		AnswerRun: "run-next", At: at})
	rp := only[PlanRequest](t, next)
	if rp.Failure == nil || rp.Failure.Step != 3 || !strings.Contains(rp.Failure.Suggestion, "answered: the last 30 days") {
		t.Fatalf("replan failure %+v", rp.Failure)
	}
	c := rp.Run.Clarifications
	if len(c) != 1 || c[0].Answer != "the last 30 days" || c[0].By != "ada" || c[0].RunID != "run-next" || c[0].Question != "needs a date range" {
		t.Fatalf("clarifications %+v", c)
	}
	if task := rp.Run.Task(); !strings.HasPrefix(task, "rank the outlets") || !strings.Contains(task, "Answered: the last 30 days") {
		t.Errorf("task %q", task)
	}
	// The answer grants a replan past none left: the replan count goes on.
	if rp.Run.Plan.ReplanCount != 2 || rp.Run.Plan.Live(1).Status != StepComplete {
		t.Errorf("plan %+v", rp.Run.Plan)
	}
	if a := rp.Run.Approvals; len(a) != 1 || a[0].Kind != GateClarify || a[0].Answer != "the last 30 days" {
		t.Errorf("approvals %+v", a)
	}
	// The answered run's result is also the answering request's.
	sr := only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{{Index: 4, Task: "rank them over the dates",
		Skills: []string{"engagement"}, ReturnSpec: shape, DependsOn: []int{1}}}}, At: at}))
	fin := Decide(sr.Run, Joined{Results: []StepResult{{Step: 4, Outcome: OutcomeComplete, MemoryKey: "k4"}}, At: at})
	res := only[RunResult](t, Decide(fin.State, Synthesised{Answer: "done", At: at}))
	if res.TerminalCode != CodeSuccess || !slices.Equal(res.Answered, []string{"run-next"}) {
		t.Errorf("ended %s, answered %v", res.TerminalCode, res.Answered)
	}
}

func TestDecideEndsADeclinedQuestionWithItsCode(t *testing.T) {
	d := askingRun(t, "run-decline")
	res := only[RunResult](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateRejected, By: "ada", Comment: "no idea",
		At: t0.Add(time.Minute)}))
	if res.TerminalCode != CodeMissingInfo || res.Status != PlanRejected || !strings.Contains(res.Reason, "declined by ada: no idea") ||
		!strings.Contains(res.Reason, "needs a date range") {
		t.Fatalf("ended %s %s: %s", res.TerminalCode, res.Status, res.Reason)
	}
}

func TestDecideAsksAtMostMaxClarifications(t *testing.T) {
	d := askingRun(t, "run-many")
	for i := range MaxClarifications {
		if d.Opened == nil {
			t.Fatalf("question %d: not asked", i+1)
		}
		rp := only[PlanRequest](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, Answer: "still vague", At: t0}))
		same := twoSteps()[1]
		same.Index = 10 + i
		sr := only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{same}}, At: t0}))
		d = Decide(sr.Run, Joined{Results: []StepResult{{Step: same.Index, Outcome: OutcomeInsufficient, Reason: "needs a date range"}}, At: t0})
	}
	if d.Ended == nil || d.Ended.TerminalCode != CodeMissingInfo {
		t.Fatalf("after %d answers: opened %+v, ended %+v", MaxClarifications, d.Opened, d.Ended)
	}
}

func TestDecideRoutesAnAnsweredQuestionOfIntentAgain(t *testing.T) {
	d := Decide(State{}, Requested{Request: request("run-intent"), TaskTypes: taskTypes, Calls: []domain.Call{call(10, 5)},
		Route: domain.Route{TaskType: "general", Pattern: PatternReact, Clarify: "Which outlets: active or all?"}, At: t0})
	if d.Opened == nil || d.State.Deadline != (time.Time{}) {
		t.Fatalf("opened %+v, deadline %s", d.Opened, d.State.Deadline)
	}
	at := t0.Add(time.Minute)
	// Without the router's new route the run cannot go on.
	res := only[RunResult](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, Answer: "active", At: at}))
	if res.TerminalCode != CodeAmbiguousIntent {
		t.Fatalf("unrouted answer ended %s", res.TerminalCode)
	}
	routed := Requested{Request: request("run-intent"), TaskTypes: taskTypes, Calls: []domain.Call{call(12, 6)},
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: at}
	next := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, Answer: "the active ones", At: at, Rerouted: &routed})
	rp := only[PlanRequest](t, next)
	if rp.Run.Pattern != PatternPlanThenExecute || rp.Run.Usage.Calls != 2 || len(rp.Run.Budget.Limits) == 0 ||
		!rp.Run.Deadline.Equal(at.Add(DefaultRunTimeout)) || !strings.Contains(rp.Run.Task(), "the active ones") {
		t.Fatalf("routed run: pattern %s, %d calls, deadline %s, task %q", rp.Run.Pattern, rp.Run.Usage.Calls, rp.Run.Deadline, rp.Run.Task())
	}
	if len(emitted[RunDeadline](next)) != 1 {
		t.Error("the routed run's deadline was not sent")
	}
}
