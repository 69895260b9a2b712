package defs

import (
	"context"
	"net/http"
	"slices"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/store"
)

// AgentBody is the body of POST /agent/agents and PUT
// /agent/agents/{agent_id}: the agent's fields (agents.AgentSpec; left
// out, they take the seed's defaults) and, on a PUT, the version it
// replaces unless If-Match names it.
type AgentBody struct {
	agents.AgentSpec
	Version int64 `json:"version,omitempty"`
}

// Agents loads the tenant's agents.
func Agents(ctx context.Context, st Lister, tenant string) ([]agents.Agent, error) {
	return list(ctx, st, tenant, store.KindAgent, agents.AgentOf)
}

// checkAgent validates a normalized spec of the agent id, its handoff
// targets included, answering the request itself when it fails. It
// returns how many agents the tenant has.
func (g *API) checkAgent(w http.ResponseWriter, r *http.Request, tenant, id string, spec *agents.AgentSpec) (int, bool) {
	if err := spec.Validate(id); err != nil {
		WriteInvalid(w, err)
		return 0, false
	}
	all, err := Agents(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "agent") {
		return 0, false
	}
	graph := make(map[string][]string, len(all))
	for _, a := range all {
		graph[a.AgentID] = a.SubAgents
	}
	if err := agents.CheckSubAgents(id, spec, graph); err != nil {
		WriteInvalid(w, err)
		return 0, false
	}
	return len(all), g.checkAgentSkills(w, r, tenant, spec)
}

func (g *API) createAgent(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	var body AgentBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	if body.Version != 0 {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", "a new agent has no version: it gets version 1")
		return
	}
	body.Normalize()
	id := newDefinitionID("agent")
	n, ok := g.checkAgent(w, r, tenant, id, &body.AgentSpec)
	if !ok || !underLimit(w, n, "agent") {
		return
	}
	now := g.cfg.Now()
	a := agents.Agent{AgentID: id, TenantID: tenant, AgentSpec: body.AgentSpec, Version: 1, CreatedAt: now, UpdatedAt: now}
	if !g.saveAgent(w, r, a, 0) {
		return
	}
	w.Header().Set("Location", "/agent/agents/"+id)
	writeVersioned(w, http.StatusCreated, a.Version, a)
}

// saveAgent writes a over version expected, answering the request itself
// when it cannot.
func (g *API) saveAgent(w http.ResponseWriter, r *http.Request, a agents.Agent, expected int64) bool {
	d, err := a.Definition()
	if err == nil {
		err = g.store.PutDefinition(r.Context(), d, expected)
	}
	return !g.definitionError(w, err, "agent")
}

func (g *API) listAgents(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	all, err := Agents(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "agent") {
		return
	}
	if status := r.URL.Query().Get("status"); status != "" {
		all = slices.DeleteFunc(all, func(a agents.Agent) bool { return a.Status != status })
	}
	if typ := r.URL.Query().Get("type"); typ != "" {
		all = slices.DeleteFunc(all, func(a agents.Agent) bool { return a.Type != typ })
	}
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"agents": all})
}

// loadAgent reads the tenant's agent named in the path.
func (g *API) loadAgent(w http.ResponseWriter, r *http.Request) (agents.Agent, bool) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return agents.Agent{}, false
	}
	id, ok := pathID(w, r, "agent_id", "agent")
	if !ok {
		return agents.Agent{}, false
	}
	d, err := g.store.GetDefinition(r.Context(), tenant, store.KindAgent, id)
	if g.definitionError(w, err, "agent") {
		return agents.Agent{}, false
	}
	a, err := agents.AgentOf(d)
	if g.definitionError(w, err, "agent") {
		return agents.Agent{}, false
	}
	return a, true
}

func (g *API) getAgent(w http.ResponseWriter, r *http.Request) {
	if a, ok := g.loadAgent(w, r); ok {
		writeVersioned(w, http.StatusOK, a.Version, a)
	}
}

func (g *API) putAgent(w http.ResponseWriter, r *http.Request) {
	var body AgentBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	expected, ok := expectedVersion(w, r, body.Version)
	if !ok {
		return
	}
	cur, ok := g.loadAgent(w, r)
	if !ok {
		return
	}
	if cur.Version != expected {
		handlers.WriteError(w, http.StatusConflict, "version_conflict", "agent is at another version: read it again and retry with its version")
		return
	}
	body.Normalize()
	if _, ok := g.checkAgent(w, r, cur.TenantID, cur.AgentID, &body.AgentSpec); !ok {
		return
	}
	next := agents.Agent{AgentID: cur.AgentID, TenantID: cur.TenantID, AgentSpec: body.AgentSpec, Version: expected + 1,
		CreatedAt: cur.CreatedAt, UpdatedAt: g.cfg.Now()}
	if g.saveAgent(w, r, next, expected) {
		writeVersioned(w, http.StatusOK, next.Version, next)
	}
}

func (g *API) deleteAgent(w http.ResponseWriter, r *http.Request) {
	expected, err := ifMatch(r)
	if err != nil {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	a, ok := g.loadAgent(w, r)
	if !ok {
		return
	}
	// An agent a trigger starts or another agent hands off to stays.
	all, err := Agents(r.Context(), g.store, a.TenantID)
	if g.definitionError(w, err, "agent") {
		return
	}
	for _, other := range all {
		if slices.Contains(other.SubAgents, a.AgentID) {
			handlers.WriteError(w, http.StatusConflict, "agent_in_use", "agent "+other.AgentID+" hands off to this agent")
			return
		}
	}
	triggers, err := Triggers(r.Context(), g.store, a.TenantID)
	if g.definitionError(w, err, "trigger") {
		return
	}
	for _, t := range triggers {
		if t.AgentID == a.AgentID {
			handlers.WriteError(w, http.StatusConflict, "agent_in_use", "trigger "+t.TriggerID+" starts this agent")
			return
		}
	}
	err = g.store.DeleteDefinition(r.Context(), a.TenantID, store.KindAgent, a.AgentID, expected)
	if g.definitionError(w, err, "agent") {
		return
	}
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"agent_id": a.AgentID, "deleted": true})
}
