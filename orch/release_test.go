package orch

import (
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// releasing is a policy of one tool call per run, which tenant acme may
// see released up to 5.
var releasing = BudgetPolicy{Defaults: Vector{DimToolCalls: 1}, Tenants: map[string]Vector{"acme": {DimToolCalls: 5}},
	Release: map[string]BudgetRelease{"acme": {GateTTLS: 600}}}

// budgetStopped is step 1's result when the budget refused its second
// tool call: it resumes with its turns.
func budgetStopped() StepResult {
	return StepResult{Step: 1, Outcome: OutcomeBudgetExhausted, Reason: "budget exhausted: tool_calls would reach 2 of its limit 1",
		Evidence: json.RawMessage(`{"dimension":"tool_calls","limit":1}`), Spent: Vector{DimToolCalls: 1},
		Parked: &Parked{Iteration: 2, Turns: []Turn{{Role: "assistant", ToolCallID: "c1", ToolName: "x"}, {Role: "tool", ToolCallID: "c1"}}, Observed: 1}}
}

func budgetParked(t *testing.T, runID string, policy BudgetPolicy) Decision {
	t.Helper()
	sr := started(t, runID, policy, twoSteps()[:1])
	return Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{budgetStopped()}, At: t0.Add(time.Second)})
}

func TestDecideParksAStepTheBudgetStoppedAtABudgetGate(t *testing.T) {
	d := budgetParked(t, "run-bg", releasing)
	g := d.Opened
	if g == nil || g.Kind != GateBudget || g.Budget.Dimension != DimToolCalls || g.Budget.Resume != ResumeSteps ||
		g.Budget.Limits[DimToolCalls] != 1 || g.Budget.Used[DimToolCalls] != 1 || g.Budget.Caps[DimToolCalls] != 5 {
		t.Fatalf("parked at %+v (budget %+v)", g, g.Budget)
	}
	if !g.ExpiresAt.Equal(t0.Add(time.Second + 600*time.Second)) {
		t.Errorf("a budget gate expires %s, want after the tenant's gate_ttl_s", g.ExpiresAt)
	}
	if s := d.State.Plan.Live(1); s.Status != StepAwaitingGate || len(g.Actions) != 1 || g.Actions[0].Resume.Iteration != 2 {
		t.Fatalf("step %s, actions %+v", s.Status, g.Actions)
	}
	// Without the tenant's setting the run ends as it always did.
	res := only[RunResult](t, budgetParked(t, "run-nogate", BudgetPolicy{Defaults: Vector{DimToolCalls: 1}}))
	if res.TerminalCode != CodeBudgetExhausted {
		t.Fatalf("without release: %s", res.TerminalCode)
	}
}

func TestDecideResumesAReleasedBudgetWithTheExtensionWithinTheCaps(t *testing.T) {
	d := budgetParked(t, "run-release", releasing)
	next := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, By: "ops",
		Extension: Vector{DimToolCalls: 10, DimModelCalls: 2}, At: t0.Add(time.Minute)})
	sr := only[StepRequest](t, next)
	if sr.Approved != nil || sr.Iteration != 2 || len(sr.Turns) != 2 || sr.Observed != 1 || sr.Step != 1 {
		t.Fatalf("resumed step %+v", sr)
	}
	lim := sr.Run.Budget.Limits
	if lim[DimToolCalls] != 5 || lim[DimModelCalls] != DefaultLimits[DimModelCalls]+2 {
		t.Errorf("limits after the extension %v: tool calls capped at 5, model calls +2", lim)
	}
	if a := sr.Run.Approvals; len(a) != 1 || a[0].Kind != GateBudget || a[0].Extension[DimToolCalls] != 4 || a[0].By != "ops" {
		t.Errorf("approvals %+v", a)
	}
	if !slices.Contains(auditNames(next), "budget.released") {
		t.Errorf("trace %v", auditNames(next))
	}
	done := Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"}}, At: t0.Add(time.Minute)})
	if res := only[RunResult](t, Decide(done.State, Synthesised{Answer: "ok", At: t0.Add(time.Minute)})); res.TerminalCode != CodeSuccess {
		t.Errorf("ended %s", res.TerminalCode)
	}
}

func TestDecideEndsADeniedOrExpiredBudgetGateBudgetExhausted(t *testing.T) {
	for _, decision := range []string{GateRejected, GateExpired} {
		d := budgetParked(t, "run-"+decision, releasing)
		res := only[RunResult](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: decision, By: "ops", At: t0.Add(time.Minute)}))
		if res.TerminalCode != CodeBudgetExhausted || !strings.Contains(res.Reason, "tool_calls would reach 2") {
			t.Errorf("%s: ended %s: %s", decision, res.TerminalCode, res.Reason)
		}
		var detail map[string]any
		if json.Unmarshal(res.Detail, &detail) != nil || detail["dimension"] != "tool_calls" || detail["gate"] == nil {
			t.Errorf("%s: detail %s", decision, res.Detail)
		}
	}
}

func TestDecideReleasesAtMostMaxReleases(t *testing.T) {
	p := releasing
	p.Release = map[string]BudgetRelease{"*": {MaxReleases: 1}}
	d := budgetParked(t, "run-max", p)
	sr := only[StepRequest](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, Extension: Vector{DimToolCalls: 1}, At: t0}))
	again := budgetStopped()
	res := only[RunResult](t, Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{again}, At: t0}))
	if res.TerminalCode != CodeBudgetExhausted {
		t.Fatalf("a second stop past max_releases: %s", res.TerminalCode)
	}
}

func TestDecideParksAnEarlyStopAndAReflectionStop(t *testing.T) {
	p := BudgetPolicy{Defaults: Vector{DimModelCalls: 2, DimReflectionPasses: 0}, Release: map[string]BudgetRelease{"*": {}}}
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-early"), TaskTypes: taskTypes, Policy: p,
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0})).Run
	d := Decide(run, Planned{Proposal: PlanProposal{Steps: twoSteps()}, At: t0})
	if d.Opened == nil || d.Opened.Budget.Resume != ResumeDispatch {
		t.Fatalf("early stop: opened %+v", d.Opened)
	}
	sr := only[StepRequest](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved,
		Extension: Vector{DimModelCalls: 5}, At: t0}))
	// The reflection budget (0 passes) refuses the replan: the gate holds it.
	d = Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{{Step: 1, Outcome: OutcomeFailed, Reason: "boom"}}, At: t0})
	if d.Opened == nil || d.Opened.Budget.Resume != ResumeReplan || d.Opened.Replan == nil || d.Opened.Replan.Reason != "boom" {
		t.Fatalf("reflection stop: opened %+v", d.Opened)
	}
	rp := only[PlanRequest](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved,
		Extension: Vector{DimReflectionPasses: 1}, At: t0}))
	if rp.Failure == nil || rp.Failure.Reason != "boom" || rp.Run.Plan.ReplanCount != 1 {
		t.Fatalf("released replan %+v", rp)
	}
}

func TestValidateExtension(t *testing.T) {
	b := Budget{Limits: Vector{DimToolCalls: 5, DimCostUSD: 1}, Caps: Vector{DimToolCalls: 5}}
	for ext, want := range map[string]string{
		`{"cost_usd":0.5}`:              "",
		`{"tool_calls":3}`:              "caps leave nothing",
		`{"wall_clock_s":60}`:           "cannot be extended",
		`{}`:                            "at least one dimension",
		`{"tokens":4}`:                  "not one of",
		`{"cost_usd":-1}`:               "at least 0",
		`{"tool_calls":3,"cost_usd":1}`: "cap leaves nothing to add to tool_calls",
	} {
		var v Vector
		if err := json.Unmarshal([]byte(ext), &v); err != nil {
			t.Fatal(err)
		}
		err := ValidateExtension(b, v)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", ext, err, want)
		}
	}
}
