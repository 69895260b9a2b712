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
