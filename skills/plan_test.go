package skills_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/planner"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
)

// The Client serves the planner and the executor in both modes.
var (
	_ planner.SkillFinder  = (*skills.Client)(nil)
	_ executor.SkillCaller = (*skills.Client)(nil)
)

// TestPlannerOverPlainMCPServer plans tasks with the offline model over
// the reference MCP server's tools/list (plain mode, auto-detected). One
// tool declares an output schema and takes an enum input the task names;
// the other declares none and plans through the synthesised
// skills.TextOutputSchema. Both plans pass the verification pass.
func TestPlannerOverPlainMCPServer(t *testing.T) {
	c, err := skills.NewClient(everythingStdioConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	planner := planner.NewPlanner(offline.New(), c, zerolog.Nop())

	cases := []struct {
		task, skill, field, fieldType string // the step's skill and one field of its return_spec
	}{
		{"structured weather for Chicago", "get-structured-content", "temperature", "number"},
		{"print the environment variables", "get-env", skills.TextOutputField, "string"},
		{"What is the sum of 2 and 3?", "get-sum", skills.TextOutputField, "string"},
	}
	for i, tc := range cases {
		const tenant, session = "t1", "s1"
		runID := fmt.Sprintf("run-everything-%d", i)
		run := orch.RunState{
			Request:  orch.RunRequest{RunID: runID, TenantID: tenant, UserID: "u1", SessionID: session, Message: tc.task},
			TaskType: "general", Pattern: router.PatternPlanThenExecute, Seq: 1,
			Plan: orch.Plan{PlanID: "plan-" + runID, Status: orch.PlanPlanning},
		}
		ev, err := events.New("plan-req-"+runID, events.TypePlanRequested, events.Meta{Tenant: tenant, Session: session, Run: runID},
			orch.PlanRequest{Run: run})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := planner.Handle(ctx, ev)
		if err != nil {
			t.Fatalf("%q: plan: %v", tc.task, err)
		}
		var prop orch.PlanProposal
		found := false
		for _, out := range outs {
			if out.Type() == events.TypePlanProposed {
				if err := events.Decode(out, &prop); err != nil {
					t.Fatal(err)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("%q: no %s among the outputs", tc.task, events.TypePlanProposed)
		}
		if prop.Infeasible != "" || len(prop.Steps) != 1 {
			t.Fatalf("%q: plan = %+v, infeasible %q; want one step", tc.task, prop.Steps, prop.Infeasible)
		}
		step := prop.Steps[0]
		if !slices.Equal(step.Skills, []string{tc.skill}) {
			t.Fatalf("%q: step skills = %v, want [%s]", tc.task, step.Skills, tc.skill)
		}
		var shape schema.Shape
		if err := json.Unmarshal(step.ReturnSpec.Shape, &shape); err != nil || shape.Properties[tc.field].Type != tc.fieldType {
			t.Fatalf("%q: return_spec shape = %s (%v), want %s %s", tc.task, step.ReturnSpec.Shape, err, tc.field, tc.fieldType)
		}
	}
}
