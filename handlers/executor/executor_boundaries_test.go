package executor_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// limitCase is one forbidden tool call of an executor turn.
type limitCase struct {
	name        string
	call        llm.Response
	wantContent string
	wantAudit   string
}

// runLimitCases has the model make each forbidden call and checks that it
// gets an error tool turn, the call is audited as denied, and the Skill
// Service never sees it.
func runLimitCases(t *testing.T, prefix string, cases []limitCase) {
	t.Helper()
	env := handlerstest.NewEnv(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := llmtest.Sequence(tc.call)
			x := handlerstest.NewExecutor(env, model, env.Toolcalls)
			req := handlerstest.ExecRequest(fmt.Sprintf("run-%s-%d", prefix, i), 1)
			outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, fmt.Sprintf("step-%s-%d", prefix, i), events.TypeStepRequested, req))
			it := handlerstest.Decode[orch.StepRequest](t, handlerstest.Only(t, outs, events.TypeStepIterated))
			if len(it.Turns) != 2 {
				t.Fatalf("turns = %+v", it.Turns)
			}
			name := tc.call.Message.ToolCalls[0].Name
			if call := it.Turns[0]; call.Role != "assistant" || call.ToolName != name {
				t.Errorf("call turn = %+v", call)
			}
			tool := it.Turns[1]
			if !tool.IsError || !strings.Contains(tool.Content, tc.wantContent) || tool.ToolCallID != "c1" {
				t.Errorf("tool turn = %+v, want an error containing %q", tool, tc.wantContent)
			}
			a, _ := handlerstest.AuditOf(t, outs, tc.wantAudit)
			if a.SkillID != name || a.TaskID != "task-1" {
				t.Errorf("%s audit = %+v", tc.wantAudit, a)
			}
			if slices.Contains(handlerstest.AuditNames(outs), "skill.called") {
				t.Error("a denied call was audited as skill.called")
			}
			if n := env.Demo.Calls(name); n != 0 {
				t.Errorf("the Skill Service recorded %d calls of %s", n, name)
			}
			if inv := env.Demo.Invocations(); len(inv) != 0 {
				t.Errorf("the Skill Service executed %v", inv)
			}
			// The model was offered the allowed skills only.
			var offered []string
			for _, tool := range model.Requests()[0].Tools {
				offered = append(offered, tool.Name)
			}
			if !slices.Equal(offered, []string{demo.SkillOutletList}) {
				t.Errorf("tools offered = %v, want the step's allowed_skills only", offered)
			}
		})
	}
}

// Checklist: "SubAgent-B cannot call skills outside its allowed_skills list".
func TestBoundaries_ExecutorCannotCallSkillsOutsideAllowedSkills(t *testing.T) {
	runLimitCases(t, "allowed", []limitCase{
		{"public skill outside allowed_skills", handlerstest.ToolCallResp("c1", demo.SkillEngagementAnalytics, `{"outlet_ids":["out-001"]}`),
			"permission denied", "skill.denied"},
		{"private skill of another tenant", handlerstest.ToolCallResp("c1", demo.SkillAcmeLoyaltyReport, `{}`),
			"permission denied", "skill.denied"},
		{"discovery tool", handlerstest.ToolCallResp("c1", skills.ToolLoadSkill, `{"name":"menu_catalog"}`),
			"permission denied", "skill.denied"},
	})
}

// Checklist: "SubAgent-B cannot spawn another SubAgent — attempting to do so
// returns an error".
func TestBoundaries_ExecutorCannotSpawnSubagents(t *testing.T) {
	var cases []limitCase
	for _, name := range executor.SpawnTools {
		cases = append(cases, limitCase{name, handlerstest.ToolCallResp("c1", name, `{"task":"do it for me"}`),
			executor.ErrSpawnDenied.Error(), "subagent.spawn_denied"})
	}
	runLimitCases(t, "spawn", cases)
}
