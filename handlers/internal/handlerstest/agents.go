package handlerstest

import (
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// PutAgent stores an agent of the test tenant directly.
func PutAgent(t *testing.T, env *Env, id string, edit func(*agents.AgentSpec)) agents.Agent {
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
	a := agents.Agent{AgentID: id, TenantID: Tenant, AgentSpec: spec, Version: 1, CreatedAt: now, UpdatedAt: now}
	d, err := a.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.PutDefinition(Ctx(t), d, 0); err != nil {
		t.Fatalf("PutDefinition: %v", err)
	}
	return a
}

// AgentRunRequested is a run.requested of RankTask by agent agentID.
func AgentRunRequested(t *testing.T, runID, agentID string) event.Event {
	req := RunRequest(runID, RankTask)
	req.AgentID = agentID
	return NewEvent(t, runID, events.TypeRunRequested, req)
}
