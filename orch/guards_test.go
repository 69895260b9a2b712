package orch

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// started is a routed run under policy, planned with steps and dispatched.
func started(t *testing.T, runID string, policy BudgetPolicy, steps []Step) StepRequest {
	t.Helper()
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request(runID), TaskTypes: taskTypes, Policy: policy,
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0})).Run
	return only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: steps}, At: t0}))
}

func TestBudgetLimitsComeInLayersWithinTenantCaps(t *testing.T) {
	p := BudgetPolicy{
		Defaults:  Vector{DimToolCalls: 40, DimCostUSD: 2},
		TaskTypes: map[string]Vector{"research": {DimToolCalls: 30, DimWallClockS: 300}},
		Tenants:   map[string]Vector{"acme": {DimCostUSD: 1, DimToolCalls: 35}},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	lim, clamped := p.Limits("acme", "research", 600, Vector{DimToolCalls: 50, DimMemoryWrites: 3})
	want := map[Dim]float64{DimToolCalls: 35, DimCostUSD: 1, DimWallClockS: 300, DimMemoryWrites: 3,
		DimModelCalls: DefaultLimits[DimModelCalls]}
	for d, v := range want {
		if lim[d] != v {
			t.Errorf("%s = %g, want %g (limits %v)", d, lim[d], v, lim)
		}
	}
	if !slices.Equal(clamped, []Dim{DimCostUSD, DimToolCalls}) {
		t.Errorf("clamped %v, want cost and tool calls", clamped)
	}
	for _, d := range Dims {
		if _, ok := lim[d]; !ok {
			t.Errorf("resolved limits lack %s: every dimension is bounded", d)
		}
	}
	// Without a task-type layer the pattern's run timeout sets the wall clock.
	if lim, _ := p.Limits("other", "general", 600, nil); lim[DimWallClockS] != 600 || lim[DimToolCalls] != 40 {
		t.Errorf("limits %v", lim)
	}
	for _, bad := range []BudgetPolicy{
		{Defaults: Vector{"tokens": 1}},
		{Tenants: map[string]Vector{"acme": {DimCostUSD: -1}}},
		{Escalation: &Escalation{Target: "ops", On: []string{CodeSuccess}}},
		{Escalation: &Escalation{On: []string{CodeBudgetExhausted}}},
	} {
		if bad.Validate() == nil {
			t.Errorf("policy %+v validated", bad)
		}
	}
}

func TestDecideRecordsTheResolvedBudgetAndItsDeadline(t *testing.T) {
	req := request("run-b")
	req.Budget = Vector{DimWallClockS: 90, DimToolCalls: 7}
	d := Decide(State{}, Requested{Request: req, TaskTypes: taskTypes, Policy: BudgetPolicy{Tenants: map[string]Vector{"acme": {DimToolCalls: 5}}},
		Route: domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})
	run := only[PlanRequest](t, d).Run
	if run.Budget.Limits[DimToolCalls] != 5 || run.Budget.Limits[DimWallClockS] != 90 {
		t.Fatalf("limits %v", run.Budget.Limits)
	}
	if !run.Deadline.Equal(t0.Add(90 * time.Second)) {
		t.Errorf("deadline %v, want the wall-clock budget after the request", run.Deadline)
	}
	if !slices.Contains(auditNames(d), "budget.resolved") {
		t.Errorf("no budget.resolved in %v", auditNames(d))
	}
	req.Budget = Vector{"dollars": 3}
	if res := only[RunResult](t, Decide(State{}, Requested{Request: req, At: t0})); res.TerminalCode != CodeValidationFail ||
		!strings.Contains(res.Reason, "dollars") {
		t.Errorf("an unknown budget dimension ends %s: %s", res.TerminalCode, res.Reason)
	}
}

func TestDecideStopsEarlyWhenTheRemainingWorkCannotFit(t *testing.T) {
	// Two steps need at least two more model calls and the answer a third;
	// the budget allows three in all, and routing and planning spent one.
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-e"), TaskTypes: taskTypes,
		Policy: BudgetPolicy{Defaults: Vector{DimModelCalls: 3}}, Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute},
		Calls: []domain.Call{call(10, 10)}, At: t0})).Run
	d := Decide(run, Planned{Proposal: PlanProposal{Steps: twoSteps()}, At: t0})
	res := only[RunResult](t, d)
	if res.TerminalCode != CodeBudgetExhausted || !strings.Contains(res.Reason, "early stop") {
		t.Fatalf("ended %s: %s", res.TerminalCode, res.Reason)
	}
	var ev map[string]any
	if err := json.Unmarshal(res.Detail, &ev); err != nil || ev["dimension"] != string(DimModelCalls) || ev["lower_bound"] != 3.0 {
		t.Errorf("detail %s", res.Detail)
	}
	if !slices.Contains(auditNames(d), "budget.early_stop") {
		t.Errorf("no budget.early_stop in %v", auditNames(d))
	}
}

func TestDecideStopsReplanningAtTheReflectionBudget(t *testing.T) {
	sr := started(t, "run-r", BudgetPolicy{Defaults: Vector{DimReflectionPasses: 1}}, twoSteps()[:1])
	rp := only[PlanRequest](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeFailed, Reason: "boom"}}, At: t0}))
	sr = only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{{Index: 2, Task: "other", Skills: []string{"x"}, ReturnSpec: shape}}}, At: t0}))
	res := only[RunResult](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 2, Outcome: OutcomeFailed, Reason: "boom"}}, At: t0}))
	if res.TerminalCode != CodeBudgetExhausted || !strings.Contains(res.Reason, "reflection") {
		t.Fatalf("ended %s: %s", res.TerminalCode, res.Reason)
	}
}

func TestDecideEndsAReplanIntoTheSameFailure(t *testing.T) {
	sr := started(t, "run-same", BudgetPolicy{}, twoSteps()[:1])
	const why = "extraction over the cap"
	rp := only[PlanRequest](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeFailed, Reason: why}}, At: t0}))
	same := twoSteps()[0]
	same.Index = 2
	// The identical revision runs once more (the first failure may have
	// been a slip) …
	sr = only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{same}}, At: t0}))
	// … and failing the same way ends the run at once, with two replans
	// left unspent.
	d := Decide(sr.Run, Joined{Results: []StepResult{{Step: 2, Outcome: OutcomeFailed, Reason: why}}, At: t0})
	res := only[RunResult](t, d)
	if res.TerminalCode != CodeRepeatedFailure || !strings.Contains(res.Reason, "a replan of step 1, failed the same way") {
		t.Fatalf("ended %s: %s", res.TerminalCode, res.Reason)
	}
	var ev map[string]any
	if json.Unmarshal(res.Detail, &ev); ev["repeats_step"] != 1.0 || ev["failure"] != why {
		t.Errorf("evidence %s", res.Detail)
	}
	if d.State.Plan.ReplanCount != 1 {
		t.Errorf("replans %d: the refused revision spent no further replan", d.State.Plan.ReplanCount)
	}
}

func TestDecideAsksForMissingInfoWhenNoReplanSuppliesIt(t *testing.T) {
	sr := started(t, "run-mi", BudgetPolicy{}, twoSteps()[:1])
	for i := 2; ; i++ {
		d := Decide(sr.Run, Joined{Results: []StepResult{{Step: sr.Step, Outcome: OutcomeInsufficient, Reason: "needs the date range"}}, At: t0})
		if g := d.Opened; g != nil {
			// The replans spent, the run asks its user instead of ending.
			if g.Kind != GateClarify || g.Question.Text != "needs the date range" || g.Question.Code != CodeMissingInfo || i != MaxReplans+2 {
				t.Fatalf("after %d attempts parked at %+v", i-1, g)
			}
			res := only[RunResult](t, Decide(d.State, GateResolved{Gate: g.ID, Decision: GateExpired, At: g.ExpiresAt}))
			if res.TerminalCode != CodeMissingInfo || !strings.Contains(res.Reason, "needs the date range") || res.Status != PlanExpired {
				t.Fatalf("unanswered, ended %s %s: %s", res.TerminalCode, res.Status, res.Reason)
			}
			return
		}
		rp := only[PlanRequest](t, d)
		sr = only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{{Index: i, Task: "try " + string(rune('a'+i)), Skills: []string{"x"}, ReturnSpec: shape}}}, At: t0}))
	}
}

func TestDecideAsksWhenTheRouterFindsTheIntentAmbiguous(t *testing.T) {
	d := Decide(State{}, Requested{Request: request("run-a"), TaskTypes: taskTypes,
		Route: domain.Route{TaskType: "general", Pattern: PatternReact, Clarify: "Which outlets: active or all?"}, At: t0})
	if g := d.Opened; g == nil || g.Kind != GateClarify || g.Question.Code != CodeAmbiguousIntent || g.Replan != nil {
		t.Fatalf("not parked at a clarify gate: %+v", d.Opened)
	}
	res := only[RunResult](t, Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateExpired, At: d.Opened.ExpiresAt}))
	if res.TerminalCode != CodeAmbiguousIntent || !strings.Contains(res.Reason, "active or all") {
		t.Fatalf("ended %s: %s", res.TerminalCode, res.Reason)
	}
}

func TestDecideMapsGuardOutcomesToTheirCodes(t *testing.T) {
	for outcome, code := range map[string]string{
		OutcomeBudgetExhausted: CodeBudgetExhausted, OutcomeTimedOut: CodeTimeout, OutcomeRepeatedCall: CodeRepeatedFailure,
		OutcomePermissionDenied: CodePermissionDenied, OutcomeUnsafe: CodeUnsafeDetection,
	} {
		sr := started(t, "run-"+outcome, BudgetPolicy{}, twoSteps()[:1])
		ev := json.RawMessage(`{"guard":"` + outcome + `"}`)
		res := only[RunResult](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: outcome, Reason: "r", Evidence: ev,
			Spent: Vector{DimToolCalls: 2}}}, At: t0}))
		if res.TerminalCode != code || string(res.Detail) != string(ev) {
			t.Errorf("%s ends %s with %s, want %s with the evidence", outcome, res.TerminalCode, res.Detail, code)
		}
	}
}

func TestDecideEscalatesToReviewUnderItsPolicy(t *testing.T) {
	policy := BudgetPolicy{Escalation: &Escalation{Target: "ops-review", On: []string{CodeBudgetExhausted}}}
	sr := started(t, "run-esc", policy, twoSteps())
	d := Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeBudgetExhausted, Reason: "tool_calls spent",
		Evidence: json.RawMessage(`{"dimension":"tool_calls"}`)}}, At: t0})
	res := only[RunResult](t, d)
	if res.TerminalCode != CodeReviewRequired || !strings.Contains(res.Response, "ops-review") {
		t.Fatalf("ended %s: %s", res.TerminalCode, res.Response)
	}
	var packet map[string]any
	if err := json.Unmarshal(res.Detail, &packet); err != nil || packet["code"] != CodeBudgetExhausted || packet["target"] != "ops-review" ||
		packet["task"] != request("").Message {
		t.Fatalf("packet %s", res.Detail)
	}
	if !slices.Contains(auditNames(d), "escalation.raised") {
		t.Errorf("no escalation.raised in %v", auditNames(d))
	}
	// A code outside the policy ends as it is.
	sr = started(t, "run-noesc", policy, twoSteps())
	if res := only[RunResult](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeUnsafe, Reason: "r"}}, At: t0})); res.TerminalCode != CodeUnsafeDetection {
		t.Errorf("unsafe ends %s", res.TerminalCode)
	}
}

// TestDecideRecordsTheRunsQuotas: the decider resolves the token quotas
// a run draws from (its tenant's, wildcard or named; its agent's; its
// session's) into its state and budget.resolved, so a replay sees them;
// invalid quotas do not validate.
func TestDecideRecordsTheRunsQuotas(t *testing.T) {
	p := BudgetPolicy{Quotas: &Quotas{
		Tenants:       map[string]TokenQuota{"*": {DailyTokens: 1000}, "other": {MonthlyTokens: 5}},
		Agents:        map[string]TokenQuota{"acme/helper": {DailyTokens: 300}},
		SessionTokens: 700}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	req := request("run-q")
	d := Decide(State{}, Requested{Request: req, TaskTypes: taskTypes, Policy: p,
		Route: domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})
	run := only[PlanRequest](t, d).Run
	want := []Quota{{Scope: QuotaTenant, Subject: req.TenantID, Period: PeriodDay, Tokens: 1000},
		{Scope: QuotaSession, Subject: req.SessionID, Period: PeriodTotal, Tokens: 700}}
	if !slices.Equal(run.Budget.Quotas, want) {
		t.Fatalf("quotas %+v, want %+v", run.Budget.Quotas, want)
	}
	if got := p.QuotasFor("acme", "helper", ""); len(got) != 2 || got[1] != (Quota{Scope: QuotaAgent, Subject: "helper", Period: PeriodDay, Tokens: 300}) {
		t.Errorf("an agent's quotas %+v", got)
	}
	if got := p.QuotasFor("other", "", ""); len(got) != 1 || got[0].Period != PeriodMonth || got[0].Tokens != 5 {
		t.Errorf("a named tenant's quotas %+v replace the wildcard's", got)
	}
	if got := (BudgetPolicy{}).QuotasFor("acme", "a", "s"); got != nil {
		t.Errorf("no quotas configured yet %+v", got)
	}
	for _, bad := range []Quotas{
		{Tenants: map[string]TokenQuota{"acme": {DailyTokens: -1}}},
		{Agents: map[string]TokenQuota{"helper": {DailyTokens: 1}}},
		{Tenants: map[string]TokenQuota{"a b": {DailyTokens: 1}}},
		{SessionTokens: math.Inf(1)},
	} {
		if (BudgetPolicy{Quotas: &bad}).Validate() == nil {
			t.Errorf("quotas %+v validated", bad)
		}
	}
}

// TestDecideGivesOneQualityPassThenHalts: an answer below the confidence
// threshold, or sources in conflict, get one replan (a reflection pass,
// a cross-check pass) with the critic's verdict replan; the same outcome
// again halts the run with its code (LOW_CONFIDENCE, SOURCE_CONFLICT),
// the verdict escalate and the step's evidence as the detail, even when
// the revision repeats the step (the repeated-step guard would say
// REPEATED_FAILURE) and with replans left.
func TestDecideGivesOneQualityPassThenHalts(t *testing.T) {
	low := 0.3
	for outcome, code := range map[string]string{OutcomeLowConfidence: CodeLowConfidence, OutcomeSourceConflict: CodeSourceConflict} {
		t.Run(outcome, func(t *testing.T) {
			sr := started(t, "run-"+outcome, BudgetPolicy{}, twoSteps()[:1])
			ev := json.RawMessage(`{"step":1,"conflicts":[{"source":"crm","claim":"12"},{"source":"erp","claim":"14"}]}`)
			fail := StepResult{Step: 1, Outcome: outcome, Reason: "the outlet count", Evidence: ev, Confidence: &low}
			d := Decide(sr.Run, Joined{Results: []StepResult{fail}, At: t0})
			rp := only[PlanRequest](t, d)
			if rp.Failure == nil || rp.Failure.Outcome != outcome || rp.Run.Plan.ReplanCount != 1 ||
				rp.Run.Plan.ReplanHistory[0].Trigger != outcome {
				t.Fatalf("first %s: %+v, history %+v", outcome, rp.Failure, rp.Run.Plan.ReplanHistory)
			}
			if v := verdicts(d); len(v) != 1 || v[0].Verdict != VerdictReplan || v[0].StepScores[0].Scores["confidence"] != low {
				t.Fatalf("first verdict %+v", v)
			}
			same := twoSteps()[0]
			same.Index = 2
			sr = only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{same}}, At: t0}))
			fail.Step = 2
			d = Decide(sr.Run, Joined{Results: []StepResult{fail}, At: t0})
			res := only[RunResult](t, d)
			if res.TerminalCode != code || !strings.Contains(res.Reason, "step 2") || !strings.Contains(res.Reason, "the outlet count") ||
				string(res.Detail) != string(ev) {
				t.Fatalf("second %s ended %s: %s, detail %s", outcome, res.TerminalCode, res.Reason, res.Detail)
			}
			if v := verdicts(d); len(v) != 1 || v[0].Verdict != VerdictEscalate {
				t.Fatalf("second verdict %+v", v)
			}
			if !slices.Contains(auditNames(d), "critic.escalated") || d.State.Plan.ReplanCount != 1 {
				t.Errorf("trace %v, replans %d", auditNames(d), d.State.Plan.ReplanCount)
			}
		})
	}
	// A pass spent on one outcome does not spend the other's.
	sr := started(t, "run-both", BudgetPolicy{}, twoSteps()[:1])
	rp := only[PlanRequest](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeLowConfidence, Reason: "unsure"}}, At: t0}))
	sr = only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{{Index: 2, Task: "b", Skills: []string{"x"}, ReturnSpec: shape}}}, At: t0}))
	if rp := only[PlanRequest](t, Decide(sr.Run, Joined{Results: []StepResult{{Step: 2, Outcome: OutcomeSourceConflict, Reason: "count"}}, At: t0})); rp.Run.Plan.ReplanCount != 2 {
		t.Fatalf("replans %d", rp.Run.Plan.ReplanCount)
	}
	// With no replan left, the first one halts at once.
	run := sr.Run
	run.PatternDef.MaxReplans = 1
	if res := only[RunResult](t, Decide(run, Joined{Results: []StepResult{{Step: 2, Outcome: OutcomeSourceConflict, Reason: "count"}}, At: t0})); res.TerminalCode != CodeSourceConflict {
		t.Fatalf("with no replan left ended %s: %s", res.TerminalCode, res.Reason)
	}
}

// verdicts are the critic's verdicts a decision records.
func verdicts(d Decision) []DecisionRecord {
	var out []DecisionRecord
	for _, a := range d.Audits {
		if rec, ok := a.Payload.(DecisionRecord); ok && a.Name == "critic.verdict" {
			out = append(out, rec)
		}
	}
	return out
}

func TestRunMinConfidence(t *testing.T) {
	if c := (RunState{}).MinConfidence(); c != DefaultMinConfidence {
		t.Errorf("default %g", c)
	}
	if c := (RunState{PatternDef: domain.Pattern{MinConfidence: 0.8}}).MinConfidence(); c != 0.8 {
		t.Errorf("pattern's %g", c)
	}
}
