package orch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/domain"
)

// The routing decision records what every later decision of the run needs
// from the configuration: the task type's framing and the chosen pattern's
// definition. A replay reads them from the state, not from today's config.
func TestDecideRecordsFramingAndPatternDefinition(t *testing.T) {
	tts := []domain.TaskType{{Name: "risk", Patterns: []string{PatternSupervisor, PatternReact}, Framing: "by dimension"}}
	pats := []domain.Pattern{{Name: PatternReact, MaxIterations: 9}, {Name: PatternSupervisor, MaxIterations: 4, MaxLanes: 3}}
	d := Decide(State{}, Requested{Request: request("run-f"), TaskTypes: tts, Patterns: pats,
		Route: domain.Route{TaskType: "risk", Pattern: PatternSupervisor}, At: t0})
	run := only[PlanRequest](t, d).Run
	if run.Framing != "by dimension" || run.PatternDef != pats[1] {
		t.Fatalf("state records framing %q and pattern %+v", run.Framing, run.PatternDef)
	}
	var mode any
	for _, a := range d.Audits {
		if a.Name == "subagent_a.spawned" {
			mode = a.Payload.(map[string]any)["mode"]
		}
	}
	if mode != "supervise" {
		t.Fatalf("the planner was spawned in mode %v, want supervise", mode)
	}
	// With no task type configured the pattern falls back to ReACT.
	d = Decide(State{}, Requested{Request: request("run-g"), Route: domain.Route{TaskType: "general"}, At: t0})
	if p := only[PlanRequest](t, d).Run.Pattern; p != PatternReact {
		t.Fatalf("fallback pattern %q, want react", p)
	}
}

// Lanes fan out as one group recorded with its correlation id, and their
// join and the synthesis that derives from them are recorded too: the
// provenance of a supervisor run.
func TestDecideRecordsFanOutFanInAndSynthesisProvenance(t *testing.T) {
	s := Decide(State{}, Requested{Request: request("run-l"), Route: domain.Route{TaskType: "general", Pattern: PatternSupervisor}, At: t0}).State
	lanes := []Step{
		{Index: 1, Task: "financial", Skills: []string{"a"}, ReturnSpec: shape, Loop: &Loop{MaxTurns: 5, SessionID: "s1-lane1"}},
		{Index: 2, Task: "legal", Skills: []string{"b"}, ReturnSpec: shape, Loop: &Loop{MaxTurns: 5, SessionID: "s1-lane2"}},
	}
	d := Decide(s, Planned{Proposal: PlanProposal{Steps: lanes}, At: t0})
	names := auditNames(d)
	if !slices.Contains(names, "supervisor.decomposed") || !slices.Contains(names, "fanout.started") || slices.Contains(names, "plan.received") {
		t.Fatalf("audits %v", names)
	}
	srs := stepRequests(d)
	if len(srs) != 2 {
		t.Fatalf("%d lanes dispatched, want 2", len(srs))
	}
	g := srs[0].Group
	if g.Expected != 2 || srs[1].Group != g {
		t.Fatalf("lanes in groups %+v and %+v", g, srs[1].Group)
	}
	results := []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"}, {Step: 2, Outcome: OutcomeComplete, MemoryKey: "k2"}}
	j := Decide(d.State, Joined{Group: g, Results: results, At: t0})
	if names := auditNames(j); !slices.Contains(names, "fanin.joined") || j.Review == nil || len(j.Review.Steps) != 2 || j.Synthesise != nil {
		t.Fatalf("join audits %v, review %+v, synthesise %v: want the lanes reviewed first", names, j.Review, j.Synthesise)
	}
	j = Decide(j.State, Reviewed{Sufficient: true, At: t0})
	if names := auditNames(j); !slices.Contains(names, "supervisor.reviewed") || !slices.Contains(names, "synthesis.started") || j.Synthesise == nil {
		t.Fatalf("review audits %v, synthesise %v", names, j.Synthesise)
	}
	for _, a := range j.Audits {
		if a.Name == "synthesis.started" {
			if from := a.Payload.(map[string]any)["derived_from"].([]map[string]any); len(from) != 2 {
				t.Fatalf("synthesis derives from %v, want both lanes", from)
			}
		}
	}
}

// A supervisor whose review finds gaps fans out again: a replan whose
// failure names the gaps, keeping the lanes that answered, until the
// pattern's replan limit, past which the findings are synthesised as they
// are. A plan-then-execute run is never reviewed.
func TestDecideSupervisorReiteratesOnGapsWithinItsReplanLimit(t *testing.T) {
	s := Decide(State{}, Requested{Request: request("run-r"), Patterns: []domain.Pattern{{Name: PatternSupervisor, MaxReplans: 1}},
		Route: domain.Route{TaskType: "general", Pattern: PatternSupervisor}, At: t0}).State
	lane := func(i int, task string) Step {
		return Step{Index: i, Task: task, Skills: []string{"a"}, ReturnSpec: shape, Loop: &Loop{MaxTurns: 5, SessionID: fmt.Sprintf("s1-lane%d", i)}}
	}
	d := Decide(s, Planned{Proposal: PlanProposal{Steps: []Step{lane(1, "financial"), lane(2, "legal")}}, At: t0})
	g := stepRequests(d)[0].Group
	j := Decide(d.State, Joined{Group: g, Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"},
		{Step: 2, Outcome: OutcomeComplete, MemoryKey: "k2"}}, At: t0})
	calls := []domain.Call{{Task: domain.TaskReview, InputTokens: 40, OutputTokens: 9}}
	r := Decide(j.State, Reviewed{Gaps: "the legal lane found no filings", Calls: calls, At: t0})
	pr := only[PlanRequest](t, r)
	if r.Synthesise != nil || pr.Failure == nil || pr.Failure.Outcome != OutcomeInsufficient ||
		pr.Failure.Reason != ReviewGapsPrefix+"the legal lane found no filings" || pr.Run.Plan.ReplanCount != 1 {
		t.Fatalf("review with gaps: synthesise %v, plan request %+v", r.Synthesise, pr.Failure)
	}
	if r.State.Usage.Calls != j.State.Usage.Calls+1 || !slices.Contains(auditNames(r), "model.called") {
		t.Fatalf("the review's model call is not counted: %+v", r.State.Usage)
	}
	// The second fan-out keeps both lanes and adds one; its review still
	// finds gaps, but the replan limit is reached: the answer is made.
	re := Decide(r.State, Planned{Proposal: PlanProposal{Steps: []Step{lane(3, "legal filings")}}, At: t0})
	if names := auditNames(re); !slices.Contains(names, "supervisor.reiterated") {
		t.Fatalf("re-iteration audits %v", names)
	}
	sr := stepRequests(re)
	if len(sr) != 1 || sr[0].Step != 3 {
		t.Fatalf("re-iteration dispatched %+v, want lane 3 only", sr)
	}
	j2 := Decide(re.State, Joined{Group: sr[0].Group, Results: []StepResult{{Step: 3, Outcome: OutcomeComplete, MemoryKey: "k3"}}, At: t0})
	if j2.Review == nil || j2.Review.Iteration != 2 || len(j2.Review.Steps) != 3 {
		t.Fatalf("second review %+v, want iteration 2 over 3 lanes", j2.Review)
	}
	last := Decide(j2.State, Reviewed{Gaps: "still thin", At: t0})
	if last.Synthesise == nil || len(last.Synthesise.Steps) != 3 || len(last.Emits) != 0 {
		t.Fatalf("past the limit: synthesise %+v, emits %d", last.Synthesise, len(last.Emits))
	}
	for _, a := range last.Audits {
		if p, ok := a.Payload.(map[string]any); a.Name == "supervisor.reviewed" && (!ok || p["replan_limit_reached"] != true) {
			t.Fatalf("supervisor.reviewed %v, want the limit recorded", a.Payload)
		}
	}
	// A failed review ends the run with its code.
	if res := only[RunResult](t, Decide(j.State, Reviewed{Failure: &Failure{Code: CodeUnavailableDep, Reason: "model down"}, At: t0})); res.TerminalCode != CodeUnavailableDep {
		t.Fatalf("failed review ended %s", res.TerminalCode)
	}
	// Plan-then-execute goes straight to synthesis.
	p := Decide(State{}, Requested{Request: request("run-p"), Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0}).State
	pd := Decide(p, Planned{Proposal: PlanProposal{Steps: []Step{{Index: 1, Task: "one", ReturnSpec: shape}}}, At: t0})
	pj := Decide(pd.State, Joined{Group: stepRequests(pd)[0].Group, Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k"}}, At: t0})
	if pj.Review != nil || pj.Synthesise == nil {
		t.Fatalf("plan-then-execute: review %+v, synthesise %v", pj.Review, pj.Synthesise)
	}
}

// stepRequests are the steps a decision dispatches.
func stepRequests(d Decision) []StepRequest {
	var out []StepRequest
	for _, e := range d.Emits {
		if sr, ok := e.Data.(StepRequest); ok {
			out = append(out, sr)
		}
	}
	return out
}

// A fan-out group gets a deadline, delivered by the server at dispatch
// time plus the pattern's group timeout; a group of one gets none.
// Joined at the deadline with a member missing, the run answers from the
// others and ends PARTIAL_SUCCESS naming the missing step; with none
// finished it ends TIMEOUT.
func TestDecideGroupDeadlineJoinsPartially(t *testing.T) {
	s := Decide(State{}, Requested{Request: request("run-d"), Patterns: []domain.Pattern{{Name: PatternPlanThenExecute, GroupTimeoutS: 30}},
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0}).State
	steps := []Step{{Index: 1, Task: "fast", ReturnSpec: shape}, {Index: 2, Task: "slow", ReturnSpec: shape},
		{Index: 3, Task: "after", ReturnSpec: shape, DependsOn: []int{1}}}
	d := Decide(s, Planned{Proposal: PlanProposal{Steps: steps}, At: t0})
	var deadline *Emit
	for i, e := range d.Emits {
		if _, ok := e.Data.(GroupDeadline); ok {
			deadline = &d.Emits[i]
		}
	}
	if deadline == nil || !deadline.At.Equal(t0.Add(30*time.Second)) || deadline.Data.(GroupDeadline).Group.Expected != 2 {
		t.Fatalf("deadline emit %+v, want the group of 2 at t0+30s", deadline)
	}
	g := deadline.Data.(GroupDeadline).Group
	j := Decide(d.State, Joined{Group: g, Partial: true, At: t0.Add(30 * time.Second),
		Results: []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"}}})
	if j.Synthesise == nil || len(j.Synthesise.Steps) != 1 || len(stepRequests(j)) != 0 {
		t.Fatalf("partial join: synthesise %+v, dispatched %d (step 3 must not start after a deadline)", j.Synthesise, len(stepRequests(j)))
	}
	end := Decide(j.State, Synthesised{Answer: "fast result", At: t0.Add(31 * time.Second)})
	res := only[RunResult](t, end)
	if res.TerminalCode != CodePartialSuccess || !strings.Contains(res.Response, "fast result") ||
		!strings.Contains(res.Response, "step 2 (slow)") || !strings.Contains(res.Reason, "step 2 (slow)") {
		t.Fatalf("result %s: %q (reason %q)", res.TerminalCode, res.Response, res.Reason)
	}
	none := Decide(d.State, Joined{Group: g, Partial: true, At: t0.Add(30 * time.Second)})
	if res := only[RunResult](t, none); res.TerminalCode != CodeTimeout {
		t.Fatalf("nothing finished: %s, want TIMEOUT", res.TerminalCode)
	}
	// A group of one has no deadline message.
	one := Decide(s, Planned{Proposal: PlanProposal{Steps: steps[:1]}, At: t0})
	if len(one.Emits) != 1 {
		t.Fatalf("a group of one emits %d messages, want its step only", len(one.Emits))
	}
}

// The replan limit is a runtime setting of the pattern, read from the
// run's recorded state: with max_replans 1 the second failure ends the
// run REPEATED_FAILURE.
func TestDecideReplanLimitComesFromThePattern(t *testing.T) {
	s := Decide(State{}, Requested{Request: request("run-m"), Patterns: []domain.Pattern{{Name: PatternPlanThenExecute, MaxReplans: 1}},
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0}).State
	step := []Step{{Index: 1, Task: "a", ReturnSpec: shape}}
	d := Decide(s, Planned{Proposal: PlanProposal{Steps: step}, At: t0})
	d = Decide(d.State, Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeFailed, Reason: "x"}}, At: t0})
	if pr := only[PlanRequest](t, d); pr.Run.Plan.ReplanCount != 1 {
		t.Fatalf("first failure: replan %d", pr.Run.Plan.ReplanCount)
	}
	d = Decide(d.State, Planned{Proposal: PlanProposal{Steps: []Step{{Index: 2, Task: "a again", ReturnSpec: shape}}}, At: t0})
	d = Decide(d.State, Joined{Results: []StepResult{{Step: 2, Outcome: OutcomeFailed, Reason: "y"}}, At: t0})
	if res := only[RunResult](t, d); res.TerminalCode != CodeRepeatedFailure {
		t.Fatalf("second failure with max_replans 1: %s, want REPEATED_FAILURE", res.TerminalCode)
	}
}

// A run gets its wall-clock deadline with its first decision, as a
// message delivered at the request time plus the pattern's run timeout;
// stopped at the deadline, it ends TIMEOUT, not USER_CANCEL.
func TestDecideRunDeadline(t *testing.T) {
	d := Decide(State{}, Requested{Request: request("run-w"), Patterns: []domain.Pattern{{Name: PatternPlanThenExecute, RunTimeoutS: 90}},
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0})
	var dl *Emit
	for i, e := range d.Emits {
		if _, ok := e.Data.(RunDeadline); ok {
			dl = &d.Emits[i]
		}
	}
	if dl == nil || !dl.At.Equal(t0.Add(90*time.Second)) || !d.State.Deadline.Equal(dl.At) || dl.Data.(RunDeadline).RunID != "run-w" {
		t.Fatalf("run deadline %+v, state deadline %v", dl, d.State.Deadline)
	}
	p := Decide(d.State, Planned{Proposal: PlanProposal{Steps: []Step{{Index: 1, Task: "a", ReturnSpec: shape}}}, At: t0})
	end := Decide(p.State, Cancelled{Input: Joined{Results: []StepResult{{Step: 1, Outcome: OutcomeCancelled, Reason: "stopped"}}},
		By: "deadline", Timeout: true, At: t0.Add(90 * time.Second)})
	if res := only[RunResult](t, end); res.TerminalCode != CodeTimeout {
		t.Fatalf("stopped at its deadline: %s, want TIMEOUT", res.TerminalCode)
	}
}
