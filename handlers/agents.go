package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// LoadAgent returns the tenant's agent id if a run can act as it. An agent
// the tenant does not have (another tenant's included) is an
// *agents.Error with code unknown_agent, one that is not active
// agent_inactive; any other error is the store's.
func LoadAgent(ctx context.Context, st DefinitionReader, tenantID, id string) (agents.Agent, error) {
	unknown := &agents.Error{Code: agents.CodeUnknownAgent, Field: "agent_id",
		Message: fmt.Sprintf("agent %q is not defined for this tenant", id)}
	if !agents.ValidID(id) {
		return agents.Agent{}, unknown
	}
	d, err := st.GetDefinition(ctx, tenantID, store.KindAgent, id)
	if errors.Is(err, store.ErrNotFound) {
		return agents.Agent{}, unknown
	}
	if err != nil {
		return agents.Agent{}, fmt.Errorf("handlers: load agent %q: %w", id, err)
	}
	a, err := agents.AgentOf(d)
	if err != nil {
		return agents.Agent{}, err
	}
	if a.Status != agents.StatusActive {
		return agents.Agent{}, &agents.Error{Code: agents.CodeAgentInactive, Field: "agent_id",
			Message: fmt.Sprintf("agent %q is %s, not active", id, a.Status)}
	}
	return a, nil
}

// DefinitionReader reads one of a tenant's agent, trigger or tool
// definitions.
type DefinitionReader interface {
	GetDefinition(ctx context.Context, tenantID, kind, id string) (store.Definition, error)
}

// RunDef is what a run records of agent a: its definition with the
// definitions of the skills it may load (the active ones the tenant has)
// and, for a supervisor, of the sub-agents its lanes may run as, so that
// loading one later, or assigning a lane, is a decision on recorded data.
func RunDef(ctx context.Context, st DefinitionReader, a agents.Agent) (*orch.AgentDef, error) {
	def := a.RunDef()
	for _, id := range a.Skills {
		d, err := st.GetDefinition(ctx, a.TenantID, store.KindSkill, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since: not loadable
		}
		if err != nil {
			return nil, fmt.Errorf("handlers: load skill %q of agent %q: %w", id, a.AgentID, err)
		}
		s, err := agents.SkillOf(d)
		if err != nil {
			return nil, err
		}
		if s.Status == agents.SkillActive {
			def.Skills = append(def.Skills, s.RunDef())
		}
	}
	if def.Supervises() {
		// Its lanes run as its sub-agents: those the tenant has active
		// now, recorded with the run (domain.AgentDef.AsMember).
		for _, id := range a.SubAgents {
			m, err := LoadAgent(ctx, st, a.TenantID, id)
			var refused *agents.Error
			switch {
			case errors.As(err, &refused):
				continue // deleted or inactive since: no lane runs as it
			case err != nil:
				return nil, err
			}
			def.Members = append(def.Members, m.RunDef().AsMember())
		}
	}
	return def, nil
}

// LoadRunDef loads the tenant's agent id as a run records it (LoadAgent,
// then RunDef).
func LoadRunDef(ctx context.Context, st DefinitionReader, tenantID, id string) (*orch.AgentDef, error) {
	a, err := LoadAgent(ctx, st, tenantID, id)
	if err != nil {
		return nil, err
	}
	return RunDef(ctx, st, a)
}
