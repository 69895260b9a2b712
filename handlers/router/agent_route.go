package router

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// agentRoute classifies the message of a run acting as router agent a
// (seed 002 Router pattern): one model call chooses among its active
// sub-agents, by their names and descriptions, and the chosen one is
// loaded for the decider, which records the choice and goes on as it. A
// model failure retrying cannot fix is the route's Failure; any other
// error redelivers the request.
func (r *Router) agentRoute(ctx context.Context, req orch.RunRequest, a *orch.AgentDef, rb ledger.RunBudget) (*orch.AgentRoute, error) {
	route := &orch.AgentRoute{}
	subs := map[string]*orch.AgentDef{}
	var opts []llm.AgentOption
	for _, id := range a.SubAgents {
		def, err := handlers.LoadRunDef(ctx, r.Store, req.TenantID, id)
		var refused *agents.Error
		switch {
		case errors.As(err, &refused):
			continue // not defined any more, or not active: not a choice
		case err != nil:
			return nil, err
		}
		subs[id] = def
		route.Options = append(route.Options, id)
		opts = append(opts, llm.AgentOption{ID: id, Name: def.Name, Description: def.Description})
	}
	if len(opts) == 0 {
		route.Error = fmt.Sprintf("router agent %s has no active sub-agent", a.ID)
		return route, nil
	}
	rec := llm.Record(r.Model)
	mreq := llm.NewRequest(llm.TaskClassify, llm.ClassifyInput{Message: req.Message, Agents: opts})
	mreq.Schema = llm.ClassifySchema
	var out llm.ClassifyOutput
	_, err := llm.StructuredCheck(ctx, handlers.AgentModel(r.Budgets.Model(rec, rb), a), mreq, &out, func() error {
		if !slices.Contains(route.Options, out.AgentID) {
			return fmt.Errorf("agent_id %q is not one of %v", out.AgentID, route.Options)
		}
		return nil
	})
	route.Calls = rec.Calls()
	if err != nil {
		if route.Failure = handlers.FailureOf(err); route.Failure == nil {
			return nil, fmt.Errorf("handlers: classify: %w", err)
		}
		return route, nil
	}
	route.SubAgent, route.Reason = subs[out.AgentID], out.Reason
	return route, nil
}
