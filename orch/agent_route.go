package orch

import (
	"fmt"
	"slices"

	"github.com/agentbus/agentbus/domain"
)

// Router agents (seed 002 Router pattern). A run acting as an agent of
// type router classifies its message: the router role makes one model
// call that picks one of the agent's sub-agents, loads that sub-agent and
// passes the choice in Requested.AgentRoute. The decider records it (the
// model call, agent.routed with the options and the reason, and a routed
// record in the run's handoff chain) and the run goes on as the
// sub-agent. The session stays the router's, so each message of it is
// classified again. The choice travels in the run's state from then on,
// so replay needs no model.

// TypeRouterAgent is the agent type that classifies and hands off.
const TypeRouterAgent = "router"

// AgentRoute is a router agent's classification of a run's message: the
// sub-agent chosen (its definition as the router loaded it), why, the
// options it chose from, and the model call that chose; Failure when the
// call failed, Error when the choice could not be loaded.
type AgentRoute struct {
	SubAgent *AgentDef     `json:"sub_agent,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Options  []string      `json:"options,omitempty"`
	Calls    []domain.Call `json:"-"`
	Failure  *Failure      `json:"-"`
	Error    string        `json:"error,omitempty"`
}

// agentRouted makes a run of a router agent go on as the sub-agent its
// classification chose; it reports whether the run goes on. A run of
// any other agent goes on as it is.
func (d *decision) agentRouted(in Requested) bool {
	a := d.State.Agent
	if a == nil || a.Type != TypeRouterAgent {
		return true
	}
	r := in.AgentRoute
	if r == nil {
		d.finish(CodeValidationFail, fmt.Sprintf("router agent %s classified no message", a.ID), map[string]any{"agent_id": a.ID})
		return false
	}
	d.modelCalls(r.Calls)
	if f := r.Failure; f != nil {
		d.budgetRefused(f)
		d.finish(f.Code, "agent routing failed: "+f.Reason, f.Evidence)
		return false
	}
	sub := r.SubAgent
	detail := map[string]any{"router_agent_id": a.ID, "options": r.Options, "reason": r.Reason}
	refusal := r.Error
	switch {
	case refusal != "":
	case sub == nil:
		refusal = "no sub-agent was chosen"
	case !slices.Contains(a.SubAgents, sub.ID):
		refusal = fmt.Sprintf("agent %s does not name %q in its sub_agents", a.ID, sub.ID)
	}
	if refusal != "" {
		detail["error"] = refusal
		d.audit("agent.route_refused", "", detail)
		d.finish(CodePermissionDenied, "agent routing refused: "+refusal, detail)
		return false
	}
	detail["agent_id"] = sub.ID
	d.audit("agent.routed", "", detail)
	d.State.Handoffs = append(slices.Clone(d.State.Handoffs), HandoffRecord{From: a.ID, To: sub.ID, Reason: r.Reason,
		Depth: len(d.State.Handoffs) + 1, At: d.at, Routed: true})
	d.switchAgent(sub)
	return true
}
