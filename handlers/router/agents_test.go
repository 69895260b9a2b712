package router_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestRouterRunsAsItsAgent: the router loads the agent a run names and
// the run's state carries its definition: instructions in the persona,
// tools, limits in the budget.
func TestRouterRunsAsItsAgent(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	handlerstest.PutAgent(t, env, "agent-analyst", nil)
	outs := handlerstest.HandleTwice(t, func() ([]event.Event, error) {
		return r.Handle(handlerstest.Ctx(t), handlerstest.AgentRunRequested(t, "run-agent-1", "agent-analyst"))
	})
	run := handlerstest.Decode[orch.PlanRequest](t, handlerstest.Only(t, outs, events.TypePlanRequested)).Run
	a := run.Agent
	if a == nil || a.ID != "agent-analyst" || a.Version != 1 || !slices.Equal(a.Tools, []string{demo.SkillOutletList, demo.SkillEngagementAnalytics}) {
		t.Fatalf("run agent %+v", a)
	}
	if p := run.Context.Persona; p == nil || !strings.Contains(p.Instructions, "Name every outlet you rank.") {
		t.Fatalf("persona %+v lacks the agent's instructions", p)
	}
	pats, err := router.LoadPatterns(handlerstest.Ctx(t), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pats, func(p llm.Pattern) bool { return p.Name == run.Pattern })
	if i < 0 || run.PatternDef.MaxIterations != pats[i].MaxIterations {
		// max_turns (3) bounds the session's agent turns, not the loop's
		// model turns: the pattern keeps its own bound.
		t.Fatalf("max iterations %d, want the configured pattern's (%+v)", run.PatternDef.MaxIterations, pats)
	}
	if run.Budget.Limits[orch.DimToolCalls] != 6 {
		t.Fatalf("tool call limit %v, want the agent's 6", run.Budget.Limits[orch.DimToolCalls])
	}
	if !slices.Contains(handlerstest.AuditNames(outs), "agent.selected") {
		t.Fatalf("audits %v", handlerstest.AuditNames(outs))
	}
}

// TestRouterEndsRunsWithoutTheirAgent: a run naming an agent its tenant
// does not have, or one that is not active, ends VALIDATION_FAIL before
// any model call.
func TestRouterEndsRunsWithoutTheirAgent(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	handlerstest.PutAgent(t, env, "agent-draft", func(s *agents.AgentSpec) { s.Status = agents.StatusDraft })
	for _, tc := range []struct{ agent, reason string }{
		{"agent-ghost", "not defined"},
		{"agent-draft", "not active"},
	} {
		outs, err := r.Handle(handlerstest.Ctx(t), handlerstest.AgentRunRequested(t, "run-"+tc.agent, tc.agent))
		if err != nil {
			t.Fatalf("%s: %v", tc.agent, err)
		}
		res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, outs, events.TypeRunFinished))
		if res.TerminalCode != orch.CodeValidationFail || !strings.Contains(res.Reason, tc.reason) {
			t.Fatalf("%s: result %s %q", tc.agent, res.TerminalCode, res.Reason)
		}
		if slices.Contains(handlerstest.AuditNames(outs), "model.called") {
			t.Fatalf("%s: the routing model was called", tc.agent)
		}
	}
}
