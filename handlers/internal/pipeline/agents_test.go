package pipeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// putAgent stores an agent of the test tenant directly.
func putAgent(t *testing.T, env *testEnv, id string, edit func(*agents.AgentSpec)) agents.Agent {
	t.Helper()
	spec := agents.AgentSpec{Name: "Outlet analyst", SystemPrompt: "Name every outlet you rank.",
		Tools: []string{demo.SkillOutletList, demo.SkillEngagementAnalytics}, MaxTurns: 3,
		Limits: orch.Vector{orch.DimToolCalls: 6}}
	if edit != nil {
		edit(&spec)
	}
	spec.Normalize()
	if err := spec.Validate(id); err != nil {
		t.Fatalf("agent spec: %v", err)
	}
	now := time.Now().UTC()
	a := agents.Agent{AgentID: id, TenantID: testTenant, AgentSpec: spec, Version: 1, CreatedAt: now, UpdatedAt: now}
	d, err := a.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.st.PutDefinition(testCtx(t), d, 0); err != nil {
		t.Fatalf("PutDefinition: %v", err)
	}
	return a
}

func agentRunRequested(t *testing.T, runID, agentID string) event.Event {
	req := runRequest(runID, rankTask)
	req.AgentID = agentID
	return newEvent(t, runID, events.TypeRunRequested, req)
}

// TestRouterRunsAsItsAgent: the router loads the agent a run names and
// the run's state carries its definition: instructions in the persona,
// tools, limits in the budget.
func TestRouterRunsAsItsAgent(t *testing.T) {
	env := newEnv(t)
	r := newTestRouter(t, env)
	putAgent(t, env, "agent-analyst", nil)
	outs := handleTwice(t, func() ([]event.Event, error) {
		return r.Handle(testCtx(t), agentRunRequested(t, "run-agent-1", "agent-analyst"))
	})
	run := decode[orch.PlanRequest](t, only(t, outs, events.TypePlanRequested)).Run
	a := run.Agent
	if a == nil || a.ID != "agent-analyst" || a.Version != 1 || !slices.Equal(a.Tools, []string{demo.SkillOutletList, demo.SkillEngagementAnalytics}) {
		t.Fatalf("run agent %+v", a)
	}
	if p := run.Context.Persona; p == nil || !strings.Contains(p.Instructions, "Name every outlet you rank.") {
		t.Fatalf("persona %+v lacks the agent's instructions", p)
	}
	pats, err := router.LoadPatterns(testCtx(t), env.config)
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
	if !slices.Contains(auditNames(outs), "agent.selected") {
		t.Fatalf("audits %v", auditNames(outs))
	}
}

// TestRouterEndsRunsWithoutTheirAgent: a run naming an agent its tenant
// does not have, or one that is not active, ends VALIDATION_FAIL before
// any model call.
func TestRouterEndsRunsWithoutTheirAgent(t *testing.T) {
	env := newEnv(t)
	r := newTestRouter(t, env)
	putAgent(t, env, "agent-draft", func(s *agents.AgentSpec) { s.Status = agents.StatusDraft })
	for _, tc := range []struct{ agent, reason string }{
		{"agent-ghost", "not defined"},
		{"agent-draft", "not active"},
	} {
		outs, err := r.Handle(testCtx(t), agentRunRequested(t, "run-"+tc.agent, tc.agent))
		if err != nil {
			t.Fatalf("%s: %v", tc.agent, err)
		}
		res := decode[orch.RunResult](t, only(t, outs, events.TypeRunFinished))
		if res.TerminalCode != orch.CodeValidationFail || !strings.Contains(res.Reason, tc.reason) {
			t.Fatalf("%s: result %s %q", tc.agent, res.TerminalCode, res.Reason)
		}
		if slices.Contains(auditNames(outs), "model.called") {
			t.Fatalf("%s: the routing model was called", tc.agent)
		}
	}
}
