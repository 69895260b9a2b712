package planner_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/planner"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestPlannerDiscoversOnlyTheAgentsTools: the planner plans with the
// skills the run's agent allows, none other.
func TestPlannerDiscoversOnlyTheAgentsTools(t *testing.T) {
	env := handlerstest.NewEnv(t)
	for _, tc := range []struct {
		name  string
		tools []string
	}{
		{"no tools", []string{}},
		{"analytics only", []string{demo.SkillEngagementAnalytics}},
		{"both", []string{demo.SkillOutletList, demo.SkillEngagementAnalytics}},
	} {
		run := handlerstest.PlanRun("run-pa-"+strings.ReplaceAll(tc.name, " ", "-"), handlerstest.RankTask)
		run.Agent = &orch.AgentDef{ID: "agent-x", Tools: tc.tools}
		p := planner.NewPlanner(handlerstest.Recording(), env.Skills, handlerstest.NopLog)
		ev := handlerstest.NewEvent(t, "plan-req-"+run.Request.RunID, events.TypePlanRequested, orch.PlanRequest{Run: run})
		outs, err := p.Handle(handlerstest.Ctx(t), ev)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, outs, events.TypePlanProposed))
		if len(tc.tools) == 0 && (len(prop.Steps) != 0 || prop.Infeasible == "") {
			t.Fatalf("%s: proposal %+v, want infeasible", tc.name, prop)
		}
		for _, s := range prop.Steps {
			for _, sk := range s.Skills {
				if !slices.Contains(tc.tools, sk) {
					t.Fatalf("%s: step %d uses %s outside the agent's tools %v", tc.name, s.Index, sk, tc.tools)
				}
			}
		}
		if tc.name == "both" && len(prop.Steps) != 2 {
			t.Fatalf("%s: %d steps, want the usual 2", tc.name, len(prop.Steps))
		}
	}
}

// TestPlannerAssignsASupervisorAgentsLanesToItsSubAgents: a supervisor
// agent's planner discovers its sub-agents' tools (not its own) and
// assigns each lane to the sub-agent whose tools it uses; a supervisor
// none of whose sub-agents is active has no lane to fan out.
func TestPlannerAssignsASupervisorAgentsLanesToItsSubAgents(t *testing.T) {
	env := handlerstest.NewEnv(t)
	lead := func(members ...orch.AgentDef) *orch.AgentDef {
		return &orch.AgentDef{ID: "agent-lead", Type: orch.AgentSupervisor, Tools: []string{demo.SkillMenuCatalog},
			SubAgents: []string{"agent-researcher", "agent-analyst"}, Members: members}
	}
	researcher := orch.AgentDef{ID: "agent-researcher", Name: "Researcher", Tools: []string{demo.SkillOutletList}}
	analyst := orch.AgentDef{ID: "agent-analyst", Name: "Analyst", Tools: []string{demo.SkillOutletList, demo.SkillEngagementAnalytics}}
	for _, tc := range []struct {
		name  string
		agent *orch.AgentDef
		want  string // the sub-agent of the one lane, "" for infeasible
	}{
		{"analyst covers the chain", lead(researcher, analyst), "agent-analyst"},
		{"researcher only", lead(researcher), "agent-researcher"},
		{"none active", lead(), ""},
	} {
		run := handlerstest.PlanRun("run-lead-"+strings.ReplaceAll(tc.name, " ", "-"), handlerstest.RankTask)
		run.Pattern, run.Agent = orch.PatternSupervisor, tc.agent
		p := planner.NewPlanner(handlerstest.Recording(), env.Skills, handlerstest.NopLog)
		ev := handlerstest.NewEvent(t, "plan-req-"+run.Request.RunID, events.TypePlanRequested, orch.PlanRequest{Run: run})
		outs, err := p.Handle(handlerstest.Ctx(t), ev)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, outs, events.TypePlanProposed))
		if tc.want == "" {
			if len(prop.Steps) != 0 || !strings.Contains(prop.Infeasible, "no active sub-agent") {
				t.Fatalf("%s: proposal %+v, want infeasible", tc.name, prop)
			}
			continue
		}
		if len(prop.Steps) != 1 || prop.Steps[0].LaneAgent() != tc.want {
			t.Fatalf("%s: lanes %+v, want one run as %s", tc.name, prop.Steps, tc.want)
		}
		member := tc.agent.Member(tc.want)
		for _, sk := range prop.Steps[0].Skills {
			if !slices.Contains(member.Tools, sk) {
				t.Fatalf("%s: the lane has %s, outside %s's tools", tc.name, sk, tc.want)
			}
		}
	}
}
