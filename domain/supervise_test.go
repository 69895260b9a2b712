package domain_test

import (
	"slices"
	"testing"

	"github.com/agentbus/agentbus/domain"
)

// A supervisor agent's planner discovers its members' tools, not its
// own; any other agent's discovers what it allows. A member is recorded
// one level deep: without its own sub-agents, stages, skills or limits.
func TestSupervisorDiscoversItsMembersToolsAndRecordsThemOneLevelDeep(t *testing.T) {
	sub := domain.AgentDef{ID: "agent-res", Name: "Researcher", Type: "supervisor", Instructions: "Research.", Model: "m",
		Tools: []string{"outlet_list"}, SubAgents: []string{"agent-deep"}, Stages: []domain.AgentStage{{ID: "s"}},
		Skills: []domain.SkillDef{{Name: "k"}}, Limits: domain.Vector{domain.DimToolCalls: 1}, AutoApprove: []string{"network"},
		Members: []domain.AgentDef{{ID: "agent-deep"}}}
	m := sub.AsMember()
	if m.ID != "agent-res" || m.Instructions != "Research." || m.Model != "m" || !slices.Equal(m.Tools, []string{"outlet_list"}) ||
		m.SubAgents != nil || m.Stages != nil || m.Skills != nil || m.Limits != nil || m.AutoApprove != nil || m.Members != nil {
		t.Fatalf("member %+v, want identity, instructions, model and tools only", m)
	}
	m.Tools[0] = "changed"
	if sub.Tools[0] != "outlet_list" {
		t.Fatal("the member shares its tools with the definition")
	}
	lead := &domain.AgentDef{ID: "agent-lead", Type: domain.AgentSupervisor, Tools: []string{"menu_catalog"},
		SubAgents: []string{"agent-res"}, Members: []domain.AgentDef{sub.AsMember()}}
	if !lead.Discovers("outlet_list") || lead.Discovers("menu_catalog") || lead.Discovers("engagement_analytics") {
		t.Fatal("a supervisor discovers exactly its members' tools")
	}
	std := &domain.AgentDef{ID: "agent-std", Type: "standard", Tools: []string{"menu_catalog"}}
	if !std.Discovers("menu_catalog") || std.Discovers("outlet_list") || !(*domain.AgentDef)(nil).Discovers("any") {
		t.Fatal("any other agent discovers what it allows; no agent, anything")
	}
	if got, err := lead.LaneAgent("agent-res"); err != nil || got == nil || got.ID != "agent-res" {
		t.Fatalf("LaneAgent(agent-res) = %+v, %v", got, err)
	}
	if got, err := std.LaneAgent(""); err != nil || got != nil {
		t.Fatalf("a standard agent's lane runs as no sub-agent: %+v, %v", got, err)
	}
}
