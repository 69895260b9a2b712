package orch

import (
	"slices"
	"testing"

	"github.com/agentbus/agentbus/llm"
)

// The routing decision records what every later decision of the run needs
// from the configuration: the task type's framing and the chosen pattern's
// definition. A replay reads them from the state, not from today's config.
func TestDecideRecordsFramingAndPatternDefinition(t *testing.T) {
	tts := []llm.TaskType{{Name: "risk", Patterns: []string{PatternSupervisor, PatternReact}, Framing: "by dimension"}}
	pats := []llm.Pattern{{Name: PatternReact, MaxIterations: 9}, {Name: PatternSupervisor, MaxIterations: 4, MaxLanes: 3}}
	d := Decide(State{}, Requested{Request: request("run-f"), TaskTypes: tts, Patterns: pats,
		Route: llm.RouteOutput{TaskType: "risk", Pattern: PatternSupervisor}, At: t0})
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
	d = Decide(State{}, Requested{Request: request("run-g"), Route: llm.RouteOutput{TaskType: "general"}, At: t0})
	if p := only[PlanRequest](t, d).Run.Pattern; p != PatternReact {
		t.Fatalf("fallback pattern %q, want react", p)
	}
}

// Lanes fan out as one group recorded with its correlation id, and their
// join and the synthesis that derives from them are recorded too: the
// provenance of a supervisor run.
func TestDecideRecordsFanOutFanInAndSynthesisProvenance(t *testing.T) {
	s := Decide(State{}, Requested{Request: request("run-l"), Route: llm.RouteOutput{TaskType: "general", Pattern: PatternSupervisor}, At: t0}).State
	lanes := []Step{
		{Index: 1, Task: "financial", Skills: []string{"a"}, ReturnSpec: shape, Loop: &Loop{MaxTurns: 5, SessionID: "s1-lane1"}},
		{Index: 2, Task: "legal", Skills: []string{"b"}, ReturnSpec: shape, Loop: &Loop{MaxTurns: 5, SessionID: "s1-lane2"}},
	}
	d := Decide(s, Planned{Proposal: PlanProposal{Steps: lanes}, At: t0})
	names := auditNames(d)
	if !slices.Contains(names, "supervisor.decomposed") || !slices.Contains(names, "fanout.started") || slices.Contains(names, "plan.received") {
		t.Fatalf("audits %v", names)
	}
	if len(d.Emits) != 2 {
		t.Fatalf("%d lanes dispatched, want 2", len(d.Emits))
	}
	g := d.Emits[0].Data.(StepRequest).Group
	if g.Expected != 2 || d.Emits[1].Data.(StepRequest).Group != g {
		t.Fatalf("lanes in groups %+v and %+v", g, d.Emits[1].Data.(StepRequest).Group)
	}
	results := []StepResult{{Step: 1, Outcome: OutcomeComplete, MemoryKey: "k1"}, {Step: 2, Outcome: OutcomeComplete, MemoryKey: "k2"}}
	j := Decide(d.State, Joined{Group: g, Results: results, At: t0})
	if names := auditNames(j); !slices.Contains(names, "fanin.joined") || !slices.Contains(names, "synthesis.started") || j.Synthesise == nil {
		t.Fatalf("join audits %v, synthesise %v", names, j.Synthesise)
	}
	for _, a := range j.Audits {
		if a.Name == "synthesis.started" {
			if from := a.Payload.(map[string]any)["derived_from"].([]map[string]any); len(from) != 2 {
				t.Fatalf("synthesis derives from %v, want both lanes", from)
			}
		}
	}
}
