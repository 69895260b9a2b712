package orch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

var (
	t0        = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	taskTypes = []domain.TaskType{{Name: "general", Patterns: []string{"react", "plan-then-execute"}}}
	shape     = ReturnSpec{Shape: json.RawMessage(`{"type":"object"}`)}
)

func request(runID string) RunRequest {
	return RunRequest{RunID: runID, TenantID: "acme", UserID: "u1", SessionID: "s1", Message: "rank the outlets"}
}

func call(in, out int) domain.Call {
	return domain.Call{Task: domain.TaskRoute, Model: "test", InputTokens: in, OutputTokens: out, CostUSD: 0.001}
}

func twoSteps() []Step {
	return []Step{
		{Index: 1, Task: "list outlets", Skills: []string{"outlet_list"}, ReturnSpec: shape},
		{Index: 2, Task: "rank them", Skills: []string{"engagement"}, ReturnSpec: shape, DependsOn: []int{1}},
	}
}

// only returns the one message a decision emits, besides the run's
// deadline (sent with its first decision).
func only[T any](t *testing.T, d Decision) T {
	t.Helper()
	emitsItsState(t, d)
	var emits []Emit
	for _, e := range d.Emits {
		if _, ok := e.Data.(RunDeadline); !ok {
			emits = append(emits, e)
		}
	}
	if len(emits) != 1 {
		t.Fatalf("decision emits %d messages, want 1: %+v", len(emits), emits)
	}
	v, ok := emits[0].Data.(T)
	if !ok {
		t.Fatalf("decision emits %T, want %T", emits[0].Data, v)
	}
	return v
}

func auditNames(d Decision) []string {
	var names []string
	for _, a := range d.Audits {
		names = append(names, a.Name)
	}
	return names
}

func TestDecideRunToSuccess(t *testing.T) {
	d := Decide(State{}, Requested{Request: request("run-1"), TaskTypes: taskTypes,
		Route: domain.Route{TaskType: "general", Pattern: "plan-then-execute"}, Calls: []domain.Call{call(100, 10)}, At: t0})
	pr := only[PlanRequest](t, d)
	if pr.Run.Seq != 1 || pr.Run.Plan.Status != PlanPlanning || pr.Run.Pattern != "plan-then-execute" || pr.Run.Plan.PlanID != PlanID("run-1") {
		t.Fatalf("plan request run = %+v", pr.Run)
	}
	if got := strings.Join(auditNames(d), ","); got != "user_message.received,model.called,budget.resolved,routing.decided,subagent_a.spawned" {
		t.Errorf("audits %s", got)
	}

	d = Decide(pr.Run, Planned{Proposal: PlanProposal{Steps: twoSteps(), Usage: domain.Usage{InputTokens: 50, Calls: 1}}, At: t0.Add(time.Second)})
	s1 := only[StepRequest](t, d)
	if s1.Step != 1 || s1.Group.Expected != 1 || s1.Run.Seq != 2 || s1.Run.Plan.Live(1).Status != StepRunning || s1.Run.Plan.Live(2).Status != StepPending {
		t.Fatalf("first dispatch = step %d group %+v seq %d plan %+v", s1.Step, s1.Group, s1.Run.Seq, s1.Run.Plan.Steps)
	}
	if !s1.Run.Plan.Live(1).StartedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("step started at %v: time must come from the input", s1.Run.Plan.Live(1).StartedAt)
	}

	d = Decide(s1.Run, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1", Usage: domain.Usage{OutputTokens: 7, Calls: 2}}}, At: t0})
	s2 := only[StepRequest](t, d)
	if s2.Step != 2 || len(s2.Inputs) != 1 || s2.Inputs[0] != "k1" || s2.Group.ID == s1.Group.ID {
		t.Fatalf("second dispatch = step %d inputs %v group %s", s2.Step, s2.Inputs, s2.Group.ID)
	}

	d = Decide(s2.Run, Joined{Results: []StepResult{{Step: 2, Outcome: OutcomeComplete, MemoryKey: "k2"}}, At: t0})
	if d.Synthesise == nil || len(d.Emits) != 0 || len(d.Synthesise.Steps) != 2 || d.Synthesise.Steps[1].MemoryKey != "k2" {
		t.Fatalf("all done: synthesise %+v emits %d", d.Synthesise, len(d.Emits))
	}
	d = Decide(d.State, Synthesised{Answer: "1. Central", Calls: []domain.Call{call(30, 20)}, At: t0})
	res := only[RunResult](t, d)
	if res.TerminalCode != CodeSuccess || res.Status != PlanComplete || res.Response != "1. Central" || d.Ended == nil {
		t.Fatalf("result %+v", res)
	}
	want := domain.Usage{InputTokens: 180, OutputTokens: 37, CostUSD: 0.002, Calls: 5}
	if res.Usage.InputTokens != want.InputTokens || res.Usage.OutputTokens != want.OutputTokens || res.Usage.Calls != want.Calls {
		t.Errorf("usage %+v, want the sum of every call %+v", res.Usage, want)
	}
}

func TestDecideIsPure(t *testing.T) {
	in := Requested{Request: request("run-p"), TaskTypes: taskTypes, Route: domain.Route{TaskType: "general", Pattern: "react"}, At: t0}
	a, b := Decide(State{}, in), Decide(State{}, in)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("same input, different decisions:\n%s\n%s", ja, jb)
	}
	// Deciding never writes to the state it was given.
	run := only[PlanRequest](t, a).Run
	planned := Decide(run, Planned{Proposal: PlanProposal{Steps: twoSteps()}, At: t0}).State
	before, _ := json.Marshal(planned)
	Decide(planned, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k"}}, At: t0})
	if after, _ := json.Marshal(planned); string(after) != string(before) {
		t.Errorf("Decide changed its input state:\n%s\n%s", before, after)
	}
}

func TestDecideRouteStaysInOptions(t *testing.T) {
	d := Decide(State{}, Requested{Request: request("run-r"), TaskTypes: taskTypes, Route: domain.Route{TaskType: "poetry", Pattern: "sonnet"}, At: t0})
	run := only[PlanRequest](t, d).Run
	if run.TaskType != "general" || run.Pattern != "react" || !strings.Contains(run.Routing, "unknown task type") {
		t.Errorf("route %s/%s (%s), want general/react with the reason", run.TaskType, run.Pattern, run.Routing)
	}
}

func TestDecideEndsInvalidRequestAndModelFailures(t *testing.T) {
	bad := request("run-bad")
	bad.Message = " "
	d := Decide(State{}, Requested{Request: bad, At: t0})
	if res := only[RunResult](t, d); res.TerminalCode != CodeValidationFail {
		t.Errorf("invalid request ends %s", res.TerminalCode)
	}
	d = Decide(State{}, Requested{Request: request("run-x"), Failure: &Failure{Code: CodeUnavailableDep, Reason: "provider down"}, At: t0})
	if res := only[RunResult](t, d); res.TerminalCode != CodeUnavailableDep || !strings.Contains(res.Reason, "provider down") {
		t.Errorf("routing failure ends %s %q", res.TerminalCode, res.Reason)
	}
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-y"), TaskTypes: taskTypes, At: t0})).Run
	d = Decide(run, Planned{Proposal: PlanProposal{Code: CodeValidationFail, Infeasible: "plan stayed invalid"}, At: t0})
	if res := only[RunResult](t, d); res.TerminalCode != CodeValidationFail {
		t.Errorf("invalid plan ends %s", res.TerminalCode)
	}
	d = Decide(run, Planned{Proposal: PlanProposal{Infeasible: "no skill can do it"}, At: t0})
	if res := only[RunResult](t, d); res.TerminalCode != CodeImpossible {
		t.Errorf("infeasible plan ends %s", res.TerminalCode)
	}
}

func TestDecideReplansThenGivesUp(t *testing.T) {
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-f"), TaskTypes: taskTypes, At: t0})).Run
	next := 1
	sr := only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: []Step{{Index: next, Task: "t", ReturnSpec: shape}}}, At: t0}))
	for attempt := 1; ; attempt++ {
		d := Decide(sr.Run, Joined{Results: []StepResult{{Step: sr.Step, Outcome: OutcomeFailed, Reason: "timed out"}}, At: t0})
		if attempt > MaxReplans {
			res := only[RunResult](t, d)
			if res.TerminalCode != CodeRepeatedFailure || d.State.Plan.ReplanCount != MaxReplans || !strings.Contains(string(res.Detail), "last_failure") {
				t.Fatalf("after %d failures: %s replans %d detail %s", attempt, res.TerminalCode, d.State.Plan.ReplanCount, res.Detail)
			}
			return
		}
		rp := only[PlanRequest](t, d)
		if rp.Failure == nil || rp.Run.Plan.Status != PlanReplanning || rp.Run.Plan.ReplanCount != attempt {
			t.Fatalf("replan %d: %+v", attempt, rp.Run.Plan)
		}
		next++
		// Each revision tries something new: one that repeats the failed
		// step is refused (TestDecideRefusesARevisionThatRepeatsAFailure).
		sr = only[StepRequest](t, Decide(rp.Run, Planned{Proposal: PlanProposal{Steps: []Step{{Index: next, Task: fmt.Sprintf("t%d", next), ReturnSpec: shape}}}, At: t0}))
		if sr.Step != next || sr.Run.Plan.Live(next-1) != nil {
			t.Fatalf("replan %d dispatched step %d; the failed step must be revised", attempt, sr.Step)
		}
	}
}

func TestDecideModelFailuresInStepsEndTheRun(t *testing.T) {
	for outcome, code := range map[string]string{OutcomeInvalidOutput: CodeValidationFail, OutcomeUnavailable: CodeUnavailableDep} {
		run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-m"), TaskTypes: taskTypes, At: t0})).Run
		sr := only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: twoSteps()[:1]}, At: t0}))
		d := Decide(sr.Run, Joined{Results: []StepResult{{Step: 1, Outcome: outcome, Reason: "r"}}, At: t0})
		if res := only[RunResult](t, d); res.TerminalCode != code {
			t.Errorf("%s ends %s, want %s", outcome, res.TerminalCode, code)
		}
	}
}

func TestDecideDeadLetters(t *testing.T) {
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-d"), TaskTypes: taskTypes, At: t0})).Run
	cases := []struct {
		name string
		in   DeadLettered
		want string
	}{
		{"invalid request", DeadLettered{RunID: "run-d", TenantID: "acme", FromRequest: true, Reason: "bad"}, CodeValidationFail},
		{"request out of deliveries", DeadLettered{RunID: "run-d", TenantID: "acme", FromRequest: true, Exhausted: true, Reason: "store down"}, CodeUnavailableDep},
		{"orchestration message", DeadLettered{RunID: "run-d", TenantID: "acme", Carried: &run, Reason: "panic"}, CodeRepeatedFailure},
	}
	for _, tc := range cases {
		d := Decide(State{}, tc.in)
		res := only[RunResult](t, d)
		if res.TerminalCode != tc.want || res.RunID != "run-d" {
			t.Errorf("%s: ends %s, want %s", tc.name, res.TerminalCode, tc.want)
		}
		if tc.in.Carried != nil && (res.PlanID != run.Plan.PlanID || d.State.Seq != run.Seq+1) {
			t.Errorf("%s: result plan %q seq %d: the carried run must end", tc.name, res.PlanID, d.State.Seq)
		}
	}
}

// TestDecideCancelled: whatever input of a cancelled run arrives, the run
// ends USER_CANCEL, records what the input reports and dispatches nothing.
func TestDecideCancelled(t *testing.T) {
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-c"), TaskTypes: taskTypes, At: t0})).Run
	inFlight := only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: twoSteps()}, At: t0})).Run
	asked := t0.Add(-time.Second)
	cancel := func(in Input) Cancelled {
		return Cancelled{Input: in, By: "u1", RequestedAt: asked, At: t0.Add(time.Minute)}
	}
	cases := []struct {
		name  string
		state State
		in    Cancelled
		check func(t *testing.T, d Decision)
	}{
		{"before routing", State{}, cancel(Requested{Request: request("run-c"), At: t0}), func(t *testing.T, d Decision) {
			if d.State.Plan.PlanID != PlanID("run-c") || len(d.State.Plan.Steps) != 0 {
				t.Errorf("plan %+v", d.State.Plan)
			}
		}},
		{"while planning", run, cancel(Planned{Proposal: PlanProposal{Steps: twoSteps(), Usage: domain.Usage{Calls: 1}}, At: t0}),
			func(t *testing.T, d Decision) {
				if len(d.State.Plan.Steps) != 2 || d.State.Plan.Live(1).Status != StepPending || d.State.Usage.Calls != 1 {
					t.Errorf("the proposed steps must be recorded pending, with the planner's usage: %+v", d.State)
				}
			}},
		{"step 1 in flight finished", inFlight, cancel(Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"}}, At: t0}),
			func(t *testing.T, d Decision) {
				if s1, s2 := d.State.Plan.Live(1), d.State.Plan.Live(2); s1.Status != StepComplete || s2.Status != StepPending || !s2.StartedAt.IsZero() {
					t.Errorf("step 1 %s, step 2 %s started %v: step 1's result is recorded, step 2 never starts", s1.Status, s2.Status, s2.StartedAt)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.state, tc.in)
			res := only[RunResult](t, d)
			if res.TerminalCode != CodeUserCancel || res.Status != PlanFailed || res.Reason != "cancelled by u1" || d.Ended == nil {
				t.Fatalf("result %+v", res)
			}
			if d.Emits[0].RunScope != "run-c" {
				t.Errorf("run.finished scoped to %q, want the run: a run ends once whichever input ends it", d.Emits[0].RunScope)
			}
			var detail map[string]any
			if err := json.Unmarshal(res.Detail, &detail); err != nil || detail["cancelled_by"] != "u1" || detail["requested_at"] != asked.Format(time.RFC3339) {
				t.Errorf("detail %s: who cancelled and when", res.Detail)
			}
			names := auditNames(d)
			if len(names) < 2 || names[len(names)-2] != "run.cancelled" || names[len(names)-1] != "run.finished" {
				t.Errorf("audits %v, want run.cancelled then run.finished last", names)
			}
			if !d.State.Plan.CompletedAt.Equal(t0.Add(time.Minute)) || d.State.Seq <= tc.state.Seq {
				t.Errorf("completed at %v seq %d: time comes from the input, seq grows", d.State.Plan.CompletedAt, d.State.Seq)
			}
			tc.check(t, d)
			// A redelivery decides the same: same result, same id.
			again := Decide(tc.state, tc.in)
			a, _ := json.Marshal(d)
			b, _ := json.Marshal(again)
			if string(a) != string(b) {
				t.Errorf("same cancelled input, different decisions:\n%s\n%s", a, b)
			}
		})
	}
}

// TestDecideCancelledStepEndsTheRun: a step the executor stopped because
// the run was cancelled ends the run USER_CANCEL, before any other ending
// of the group, and is never replanned.
func TestDecideCancelledStepEndsTheRun(t *testing.T) {
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-s"), TaskTypes: taskTypes, At: t0})).Run
	steps := []Step{{Index: 1, Task: "a", ReturnSpec: shape}, {Index: 2, Task: "b", ReturnSpec: shape}}
	d := Decide(run, Planned{Proposal: PlanProposal{Steps: steps}, At: t0})
	if len(stepRequests(d)) != 2 {
		t.Fatalf("want both steps dispatched, got %d", len(stepRequests(d)))
	}
	d = Decide(d.State, Joined{Results: []StepResult{
		{Step: 1, Outcome: OutcomeUnavailable, Reason: "provider down"},
		{Step: 2, Outcome: OutcomeCancelled, Reason: "run cancelled by u1"},
	}, At: t0})
	res := only[RunResult](t, d)
	if res.TerminalCode != CodeUserCancel || res.Reason != "run cancelled by u1" || d.State.Plan.ReplanCount != 0 {
		t.Fatalf("result %s %q, replans %d", res.TerminalCode, res.Reason, d.State.Plan.ReplanCount)
	}
	if s := d.State.Plan.Live(2); s.Status != StepFailed || s.FailureReason != "run cancelled by u1" {
		t.Errorf("cancelled step %+v", s)
	}
}

// TestCarriesAloneAgreesWithTheJoin: an executor's CarriesAlone says, at
// its step's dispatch, what the join of the step's result then does: the
// plan carries the output exactly when no other step runs or waits at a
// gate and the output fits the plan's bounds.
func TestCarriesAloneAgreesWithTheJoin(t *testing.T) {
	small := json.RawMessage(`{"ids":["a","b"]}`)
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", MaxCarriedOutput) + `"}`)
	plan := func(other string, carried int) Plan {
		p := Plan{Steps: []Step{{Index: 1, Status: StepRunning, TaskID: "t1"}, {Index: 2, Status: other, TaskID: "t2"}}}
		if carried > 0 {
			p.Steps = append(p.Steps, Step{Index: 3, Status: StepComplete, Output: json.RawMessage(`"` + strings.Repeat("y", carried) + `"`)})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		plan Plan
		out  json.RawMessage
		want bool
	}{
		{"alone, small", plan(StepPending, 0), small, true},
		{"alone, over the output bound", plan(StepPending, 0), big, false},
		{"alone, over the plan's bound", plan(StepComplete, MaxCarriedOutputs-len(small)), small, false},
		{"another step running", plan(StepRunning, 0), small, false},
		{"another step at a gate", plan(StepAwaitingGate, 0), small, false},
	} {
		if got := tc.plan.CarriesAlone(1, tc.out); got != tc.want {
			t.Errorf("%s: CarriesAlone = %v, want %v", tc.name, got, tc.want)
		}
		if tc.plan.Steps[1].Status == StepRunning || tc.plan.Steps[1].Status == StepAwaitingGate {
			continue // another result may join first: the join is not this plan's
		}
		d := &decision{Decision: Decision{State: RunState{Plan: tc.plan}}}
		d.record([]StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1", Output: tc.out}})
		if got := d.State.Plan.Carried("k1") != nil; got != tc.want {
			t.Errorf("%s: the join carries the output: %v, CarriesAlone said %v", tc.name, got, tc.want)
		}
	}
}
