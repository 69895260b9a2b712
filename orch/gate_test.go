package orch

import (
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// parkedResult is step 1's result when its model chose a call that waits
// at a gate.
func parkedResult(skill string) StepResult {
	return StepResult{Step: 1, Outcome: OutcomeAwaitingGate, Reason: skill + " (destructive) awaits an approval",
		Evidence: json.RawMessage(`{"description":"deletes"}`),
		Parked: &Parked{Call: PendingCall{ID: "c1", Skill: skill, Arguments: json.RawMessage(`{"id":"r1"}`), ArgsHash: "h1",
			Mode: "destructive", N: 100}, Iteration: 1, Turns: []Turn{{Role: "assistant", ToolCallID: "c1", ToolName: skill}},
			Observed: 1}}
}

// parkAt runs a one-step plan whose step parks at a gate, and returns the
// decision that parked it.
func parkAt(t *testing.T, runID string) Decision {
	t.Helper()
	steps := []Step{{Index: 1, Task: "delete record r1", Skills: []string{"delete_record"}, ReturnSpec: shape}}
	sr := started(t, runID, BudgetPolicy{}, steps)
	return Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{parkedResult("delete_record")}, At: t0.Add(time.Second)})
}

func emitted[T any](d Decision) []T {
	var out []T
	for _, e := range d.Emits {
		if v, ok := e.Data.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestDecideParksAStepAtAGateAndSchedulesItsExpiry(t *testing.T) {
	d := parkAt(t, "run-gate")
	g := d.Opened
	if g == nil || d.State.Gate == nil || d.State.Gate.ID != g.ID || d.Ended != nil {
		t.Fatalf("not parked: opened %+v, ended %+v", g, d.Ended)
	}
	if d.State.Plan.Status != PlanAwaitingGate || d.State.Plan.Live(1).Status != StepAwaitingGate {
		t.Fatalf("plan %s, step %s", d.State.Plan.Status, d.State.Plan.Live(1).Status)
	}
	if len(emitted[StepRequest](d)) != 0 || len(emitted[PlanRequest](d)) != 0 {
		t.Fatal("a parked run dispatched work")
	}
	exp := emitted[ApprovalDecided](d)
	if len(exp) != 1 || exp[0].Decision != GateExpired || exp[0].Gate != g.ID {
		t.Fatalf("expiry %+v", exp)
	}
	for _, e := range d.Emits {
		if _, ok := e.Data.(ApprovalDecided); ok && !e.At.Equal(g.ExpiresAt) {
			t.Errorf("expiry scheduled at %s, gate expires %s", e.At, g.ExpiresAt)
		}
	}
	// The default TTL, never past the run's deadline (30 minutes).
	if !g.ExpiresAt.Equal(d.State.Deadline) {
		t.Errorf("gate expires %s, the run's deadline is %s", g.ExpiresAt, d.State.Deadline)
	}
	parked := emitted[RunParked](d)
	if len(parked) != 1 || len(parked[0].Gate.Actions) != 1 || parked[0].Gate.Actions[0].Action != "delete_record" ||
		parked[0].Gate.Actions[0].Risk != "destructive" || string(parked[0].Gate.Actions[0].Parameters) != `{"id":"r1"}` {
		t.Fatalf("run.parked %+v", parked)
	}
	if !slices.Contains(auditNames(d), "gate.opened") {
		t.Errorf("trace %v has no gate.opened", auditNames(d))
	}
}

func TestDecideResumesAnApprovedGateWithTheHeldCall(t *testing.T) {
	d := parkAt(t, "run-approve")
	at := t0.Add(time.Minute)
	next := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, By: "lead", At: at})
	sr := only[StepRequest](t, next)
	if sr.Approved == nil || sr.Approved.Gate != d.Opened.ID || sr.Approved.By != "lead" || sr.Approved.Call.Skill != "delete_record" ||
		sr.Approved.Call.N != 100 {
		t.Fatalf("resumed step's approval %+v", sr.Approved)
	}
	if sr.Iteration != 1 || len(sr.Turns) != 1 || sr.Observed != 1 {
		t.Errorf("resumed step lost its turns: %+v", sr)
	}
	if next.State.Gate != nil || next.State.Plan.Status != PlanExecuting || next.State.Plan.Live(1).Status != StepRunning {
		t.Errorf("state after approval: gate %+v, plan %s", next.State.Gate, next.State.Plan.Status)
	}
	if a := next.State.Approvals; len(a) != 1 || a[0].By != "lead" || a[0].Decision != GateApproved ||
		!slices.Equal(a[0].Actions, []string{"delete_record:h1"}) {
		t.Errorf("approvals %+v", a)
	}
	// The same resolution again finds no open gate: nothing happens.
	again := Decide(next.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, By: "lead", At: at})
	if len(again.Emits) != 0 || again.Ended != nil || !slices.Contains(auditNames(again), "gate.stale") {
		t.Errorf("a stale resolution emitted %+v", again.Emits)
	}
}

func TestDecideEndsARejectedExpiredOrCancelledGate(t *testing.T) {
	for _, tc := range []struct{ decision, status, code, reason string }{
		{GateRejected, PlanRejected, CodeUserCancel, "not approved by lead: too risky"},
		{GateExpired, PlanExpired, CodeConfirmRequired, "before it expired"},
		{GateCancelled, PlanFailed, CodeUserCancel, "cancelled by lead"},
	} {
		d := parkAt(t, "run-"+tc.decision)
		next := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: tc.decision, By: "lead", Comment: "too risky",
			At: t0.Add(time.Minute)})
		res := only[RunResult](t, next)
		if res.TerminalCode != tc.code || res.Status != tc.status || !strings.Contains(res.Reason, tc.reason) {
			t.Errorf("%s: ended %s %s: %s", tc.decision, res.TerminalCode, res.Status, res.Reason)
		}
		if s := next.State.Plan.Live(1); s.Status != StepFailed {
			t.Errorf("%s: the held step is %s", tc.decision, s.Status)
		}
		var detail struct {
			Gate     GatePacket `json:"gate"`
			Decision Approval   `json:"decision"`
		}
		if json.Unmarshal(res.Detail, &detail) != nil || detail.Gate.Gate != d.Opened.ID || detail.Decision.By != "lead" {
			t.Errorf("%s: detail %s", tc.decision, res.Detail)
		}
	}
}

func TestDecideHoldsAnInterruptedRunUntilResumed(t *testing.T) {
	sr := started(t, "run-interrupt", BudgetPolicy{}, twoSteps())
	done := StepResult{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"}
	d := Decide(sr.Run, Interrupted{Input: Joined{Group: sr.Group, Results: []StepResult{done}, At: t0}, ID: "i1", By: "ops", At: t0})
	if d.Opened == nil || d.Opened.Kind != GateInterrupt || d.State.Plan.Status != PlanPaused || d.State.Interrupt != "i1" {
		t.Fatalf("not paused: %+v, %s", d.Opened, d.State.Plan.Status)
	}
	if len(emitted[StepRequest](d)) != 0 {
		t.Fatal("an interrupted run dispatched its next step")
	}
	if d.State.Plan.Live(1).Status != StepComplete {
		t.Fatal("the input's result was not recorded")
	}
	next := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, By: "ops", At: t0.Add(time.Minute)})
	if sr2 := only[StepRequest](t, next); sr2.Step != 2 {
		t.Fatalf("resumed with step %d, want 2", sr2.Step)
	}
	// An interrupt that expires ends the run TIMEOUT.
	exp := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateExpired, At: t0.Add(time.Hour)})
	if res := only[RunResult](t, exp); res.TerminalCode != CodeTimeout || res.Status != PlanExpired {
		t.Fatalf("expired interrupt ended %s %s", res.TerminalCode, res.Status)
	}
}

func TestDecideInterruptHoldsAReplan(t *testing.T) {
	sr := started(t, "run-interrupt-replan", BudgetPolicy{}, twoSteps())
	failed := StepResult{Step: 1, Outcome: OutcomeFailed, Reason: "skill error"}
	d := Decide(sr.Run, Interrupted{Input: Joined{Group: sr.Group, Results: []StepResult{failed}, At: t0}, ID: "i1", At: t0})
	if d.Opened == nil || d.Opened.Replan == nil || len(emitted[PlanRequest](d)) != 0 {
		t.Fatalf("the replan was not held: %+v", d.Opened)
	}
	next := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, At: t0.Add(time.Minute)})
	if pr := only[PlanRequest](t, next); pr.Failure == nil || pr.Failure.Reason != "skill error" {
		t.Fatalf("resumed replan %+v", pr.Failure)
	}
}

func TestDecideReplansAFailureBeforeParkingASibling(t *testing.T) {
	steps := []Step{
		{Index: 1, Task: "delete record r1", Skills: []string{"delete_record"}, ReturnSpec: shape},
		{Index: 2, Task: "list", Skills: []string{"outlet_list"}, ReturnSpec: shape},
	}
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-mixed"), TaskTypes: taskTypes, At: t0})).Run
	d := Decide(run, Planned{Proposal: PlanProposal{Steps: steps}, At: t0})
	srs := emitted[StepRequest](d)
	if len(srs) != 2 {
		t.Fatalf("%d steps dispatched", len(srs))
	}
	next := Decide(srs[0].Run, Joined{Group: srs[0].Group, Results: []StepResult{parkedResult("delete_record"),
		{Step: 2, Outcome: OutcomeFailed, Reason: "boom"}}, At: t0})
	if next.Opened != nil || len(emitted[PlanRequest](next)) != 1 {
		t.Fatalf("want a replan and no gate: opened %+v", next.Opened)
	}
}

func TestCriticVerifiesPlansAndRecordsItsVerdicts(t *testing.T) {
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-critic"), TaskTypes: taskTypes, At: t0})).Run
	bad := []Step{{Index: 1, Task: "a", Skills: []string{"x"}, ReturnSpec: shape, DependsOn: []int{2}},
		{Index: 2, Task: "b", Skills: []string{"x"}, ReturnSpec: shape}}
	d := Decide(run, Planned{Proposal: PlanProposal{Steps: bad}, At: t0})
	pr := only[PlanRequest](t, d)
	if pr.Failure == nil || !strings.Contains(pr.Failure.Reason, "critic rejected the plan: step 1 depends on step 2") ||
		!slices.Contains(auditNames(d), "critic.plan_rejected") || len(emitted[StepRequest](d)) != 0 {
		t.Fatalf("a plan depending on a later step: %+v, trace %v", pr.Failure, auditNames(d))
	}

	// A gate approved, the step resumed and complete: the final record
	// accepts, scoring the step with its gate and approver.
	p := parkAt(t, "run-critic-gate")
	next := Decide(p.State, GateResolved{Gate: p.Opened.ID, Decision: GateApproved, By: "lead", At: t0.Add(time.Minute)})
	sr := only[StepRequest](t, next)
	j := Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k", Validated: true}},
		At: t0.Add(2 * time.Minute)})
	if !slices.Contains(auditNames(j), "critic.verdict") || j.Synthesise == nil {
		t.Fatalf("trace %v", auditNames(j))
	}
	end := Decide(j.State, Synthesised{Answer: "done", At: t0.Add(3 * time.Minute)})
	res := only[RunResult](t, end)
	rec := res.Decision
	if rec == nil || rec.Verdict != VerdictAccept || len(rec.StepScores) != 1 || rec.StepScores[0].Approver != "lead" ||
		rec.StepScores[0].Gate != p.Opened.ID || rec.StepScores[0].Scores["utility"] != 1 || rec.StepScores[0].Scores["policy"] != 1 {
		t.Fatalf("decision record %+v", rec)
	}
}
