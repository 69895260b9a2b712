package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbus/agentbus/agents"
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
