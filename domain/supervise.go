package domain

import (
	"fmt"
	"slices"
)

// Supervisor agents (seed 002 supervisor pattern). A run acting as an
// agent of type supervisor runs the supervisor pattern, and each lane it
// fans out runs as one of its sub-agents: the decomposition assigns the
// lane to a member (by id), the lane's executor gives the model that
// member's instructions, model settings and tools (its allow-list, and
// no other), and the synthesis is the supervisor's. The members are
// loaded when the run starts and recorded in its state
// (AgentDef.Members), and each lane's assignment in its step, so every
// later decision, and a replay, reads them from there.

// AgentSupervisor is the agent type whose lanes run as its sub-agents.
const AgentSupervisor = "supervisor"

// Supervises reports whether a run acting as a runs its lanes as a's
// sub-agents (a supervisor agent).
func (a *AgentDef) Supervises() bool { return a != nil && a.Type == AgentSupervisor }

// Member is the sub-agent id a supervisor's lanes may run as, as the run
// recorded it; nil when a has no such member.
func (a *AgentDef) Member(id string) *AgentDef {
	if a == nil || id == "" {
		return nil
	}
	for i := range a.Members {
		if a.Members[i].ID == id {
			return &a.Members[i]
		}
	}
	return nil
}

// LaneAgent checks a lane's assignment to the sub-agent id and returns
// the member it runs as. A supervisor agent's lane must be assigned to a
// member it names in sub_agents and the run recorded (one of the
// tenant's active agents when the run started); a lane of any other run
// is assigned to none (nil, nil).
func (a *AgentDef) LaneAgent(id string) (*AgentDef, error) {
	switch {
	case !a.Supervises() && id == "":
		return nil, nil
	case !a.Supervises():
		return nil, fmt.Errorf("a lane is assigned to agent %q, but the run's agent supervises no sub-agent", id)
	case id == "":
		return nil, fmt.Errorf("supervisor agent %s assigns each lane to one of its sub-agents %v; a lane has none", a.ID, a.MemberIDs())
	case !slices.Contains(a.SubAgents, id):
		return nil, fmt.Errorf("agent %s does not name %q in its sub_agents", a.ID, id)
	}
	m := a.Member(id)
	if m == nil {
		return nil, fmt.Errorf("sub-agent %q of agent %s was not active when the run started", id, a.ID)
	}
	return m, nil
}

// MemberIDs are the ids of the members, in the order of sub_agents.
func (a *AgentDef) MemberIDs() []string {
	var ids []string
	for _, m := range a.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// Discovers reports whether the planner of a run acting as a may offer
// the skill name: for a supervisor agent, a tool of one of its members
// (its lanes call theirs, never its own); else AllowsSkill.
func (a *AgentDef) Discovers(name string) bool {
	if !a.Supervises() {
		return a.AllowsSkill(name)
	}
	return slices.ContainsFunc(a.Members, func(m AgentDef) bool { return m.AllowsSkill(name) })
}

// AsMember is what a supervisor's run records of its sub-agent a: who it
// is, what it is for, its instructions, model and tools. A lane runs one
// level down only: the member's own sub-agents, stages, skills, history
// window, limits and approvals are left out (the run's limits are the
// supervisor's).
func (a AgentDef) AsMember() AgentDef {
	return AgentDef{ID: a.ID, Version: a.Version, Name: a.Name, Type: a.Type, Description: a.Description,
		Instructions: a.Instructions, Model: a.Model, ModelSettings: a.ModelSettings, Tools: slices.Clone(a.Tools)}
}
