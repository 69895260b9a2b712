package orch

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/domain"
)

func agentDef() *AgentDef {
	return &AgentDef{ID: "agent-1", Version: 3, Name: "Outlet analyst", Type: "standard",
		Instructions: "Answer in one paragraph.", Model: "anthropic.claude-3-haiku", Tools: []string{"outlet_list"},
		MaxTurns: 4, Limits: Vector{DimToolCalls: 7, DimInputTokens: 8000}}
}

func agentRequest(runID string) RunRequest {
	req := request(runID)
	req.AgentID = "agent-1"
	return req
}

// A run that names an agent records its definition, adds its
// instructions to the persona and
// caps its budget with the agent's limits.
func TestDecideRecordsTheAgent(t *testing.T) {
	pats := []domain.Pattern{{Name: PatternReact, MaxIterations: 9}}
	persona := &domain.Persona{Name: "Ada", Instructions: "Be kind."}
	d := Decide(State{}, Requested{Request: agentRequest("run-a1"), Agent: agentDef(), Context: RunContext{Persona: persona},
		TaskTypes: taskTypes, Patterns: pats, Route: domain.Route{TaskType: "general", Pattern: PatternReact},
		Policy: BudgetPolicy{Defaults: Vector{DimToolCalls: 20}}, At: t0})
	run := only[PlanRequest](t, d).Run
	if run.Agent == nil || run.Agent.ID != "agent-1" || run.Agent.Version != 3 || run.Agent.Model != "anthropic.claude-3-haiku" {
		t.Fatalf("state records agent %+v", run.Agent)
	}
	if p := run.Context.Persona; p == nil || p.Name != "Ada" || p.Instructions != "Be kind.\n\nAnswer in one paragraph." {
		t.Fatalf("persona %+v, want the soul's with the agent's instructions added", p)
	}
	if persona.Instructions != "Be kind." {
		t.Fatalf("the input's persona was changed: %+v", persona)
	}
	if run.PatternDef.MaxIterations != 9 {
		// max_turns bounds the session's agent turns (seed 002), not a
		// loop's model turns: the pattern keeps its own bound.
		t.Fatalf("max iterations %d, want the pattern's 9", run.PatternDef.MaxIterations)
	}
	if got := run.Budget.Limits; got[DimToolCalls] != 7 || got[DimInputTokens] != 8000 || got[DimModelCalls] != DefaultLimits[DimModelCalls] {
		t.Fatalf("limits %v, want tool_calls 7 and input_tokens 8000 from the agent", got)
	}
	if names := auditNames(d); !slices.Contains(names, "agent.selected") {
		t.Fatalf("audits %v lack agent.selected", names)
	}
	// A session with turns left runs; at the agent's max_turns it does
	// not (TestDecideTurnLimit).
	d = Decide(State{}, Requested{Request: agentRequest("run-a2"), Agent: agentDef(), SessionTurns: 3, TaskTypes: taskTypes,
		Patterns: pats, Route: domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})
	only[PlanRequest](t, d)
	// Without instructions or a soul the persona stays unset.
	a := agentDef()
	a.Instructions = ""
	d = Decide(State{}, Requested{Request: agentRequest("run-a3"), Agent: a, Route: domain.Route{TaskType: "general"}, At: t0})
	if p := only[PlanRequest](t, d).Run.Context.Persona; p != nil {
		t.Fatalf("persona %+v, want none", p)
	}
}

// A run whose agent the router could not load ends VALIDATION_FAIL
// before anything is planned; so does one whose loaded agent is not the
// one it names.
func TestDecideRefusesAMissingAgent(t *testing.T) {
	other := agentDef()
	other.ID = "agent-2"
	for name, in := range map[string]Requested{
		"not loaded": {Request: agentRequest("run-m1"), AgentError: `agent "agent-1" is not defined for tenant "acme"`},
		"nil":        {Request: agentRequest("run-m2")},
		"another":    {Request: agentRequest("run-m3"), Agent: other},
		"none named": {Request: request("run-m4"), Agent: agentDef()},
		"inactive":   {Request: agentRequest("run-m5"), AgentError: `agent "agent-1" is inactive`},
	} {
		in.At, in.Route = t0, domain.Route{TaskType: "general"}
		d := Decide(State{}, in)
		if d.Ended == nil || d.Ended.TerminalCode != CodeValidationFail {
			t.Fatalf("%s: ended %+v, want VALIDATION_FAIL", name, d.Ended)
		}
		if in.AgentError != "" && !strings.Contains(d.Ended.Reason, in.AgentError) {
			t.Fatalf("%s: reason %q does not say %q", name, d.Ended.Reason, in.AgentError)
		}
		for _, e := range d.Emits {
			if _, ok := e.Data.(PlanRequest); ok {
				t.Fatalf("%s: a plan was requested", name)
			}
		}
	}
	req := request("run-m6")
	req.AgentID = "not/a token"
	if err := ValidateRequest(req); err == nil {
		t.Fatal("ValidateRequest accepted an agent id that is no token")
	}
}

// The agent's tool allow-list is enforced on every proposal: a skill it
// does not allow never reaches a dispatched step, on the first plan and
// on a revision alike.
func TestDecideEnforcesTheAgentsTools(t *testing.T) {
	s := Decide(State{}, Requested{Request: agentRequest("run-t1"), Agent: agentDef(), TaskTypes: taskTypes,
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0}).State
	steps := twoSteps()
	steps[0].Skills = []string{"outlet_list", "delete_everything"}
	d := Decide(s, Planned{Proposal: PlanProposal{Steps: steps}, At: t0})
	srs := stepRequests(d)
	if len(srs) != 1 {
		t.Fatalf("%d steps dispatched, want 1", len(srs))
	}
	for _, st := range d.State.Plan.Steps {
		for _, sk := range st.Skills {
			if sk != "outlet_list" {
				t.Fatalf("step %d keeps skill %q outside the agent's tools", st.Index, sk)
			}
		}
	}
	if got := d.State.Plan.Steps[0].Skills; !slices.Equal(got, []string{"outlet_list"}) {
		t.Fatalf("step 1 skills %v", got)
	}
	if got := d.State.Plan.Steps[1].Skills; got == nil || len(got) != 0 {
		t.Fatalf("step 2 skills %v, want none", got)
	}
	restricted := 0
	for _, a := range d.Audits {
		if a.Name == "agent.tools_restricted" {
			restricted++
		}
	}
	if restricted != 2 {
		t.Fatalf("%d agent.tools_restricted audits, want 2", restricted)
	}
	if steps[0].Skills[1] != "delete_everything" {
		t.Fatal("the proposal's steps were changed in place")
	}
	// Without an agent every proposed skill stays.
	s = Decide(State{}, Requested{Request: request("run-t2"), TaskTypes: taskTypes,
		Route: domain.Route{TaskType: "general", Pattern: PatternPlanThenExecute}, At: t0}).State
	d = Decide(s, Planned{Proposal: PlanProposal{Steps: steps}, At: t0})
	if got := d.State.Plan.Steps[0].Skills; len(got) != 2 {
		t.Fatalf("without an agent step 1 skills %v", got)
	}
	var nilAgent *AgentDef
	if !nilAgent.AllowsSkill("anything") || agentDef().AllowsSkill("delete_everything") {
		t.Fatal("AllowsSkill")
	}
}
