package defs

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/store"
)

// TriggerBody is the body of POST /agent/triggers and PUT
// /agent/triggers/{trigger_id}: the trigger's fields (agents.TriggerSpec)
// and, on a PUT, the version it replaces unless If-Match names it.
type TriggerBody struct {
	agents.TriggerSpec
	Version int64 `json:"version,omitempty"`
}

// Triggers loads the tenant's triggers.
func Triggers(ctx context.Context, st Lister, tenant string) ([]agents.Trigger, error) {
	return list(ctx, st, tenant, store.KindTrigger, agents.TriggerOf)
}

// checkTrigger validates a normalized spec and that its agent is the
// tenant's, answering the request itself when it fails.
func (g *API) checkTrigger(w http.ResponseWriter, r *http.Request, tenant string, spec *agents.TriggerSpec) bool {
	if err := spec.Validate(); err != nil {
		WriteInvalid(w, err)
		return false
	}
	_, err := g.store.GetDefinition(r.Context(), tenant, store.KindAgent, spec.AgentID)
	if errors.Is(err, store.ErrNotFound) {
		WriteInvalid(w, &agents.Error{Code: agents.CodeUnknownAgent, Field: "agent_id",
			Message: "agent " + spec.AgentID + " is not defined for this tenant"})
		return false
	}
	return !g.definitionError(w, err, "agent")
}

func (g *API) createTrigger(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	var body TriggerBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	if body.Version != 0 {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", "a new trigger has no version: it gets version 1")
		return
	}
	body.Normalize()
	if !g.checkTrigger(w, r, tenant, &body.TriggerSpec) {
		return
	}
	all, err := g.store.ListDefinitions(r.Context(), tenant, store.KindTrigger)
	if g.definitionError(w, err, "trigger") || !underLimit(w, len(all), "trigger") {
		return
	}
	now := g.cfg.Now()
	t := agents.Trigger{TriggerID: newDefinitionID("trigger"), TenantID: tenant, TriggerSpec: body.TriggerSpec, Version: 1,
		CreatedAt: now, UpdatedAt: now}
	if !g.saveTrigger(w, r, t, 0) {
		return
	}
	w.Header().Set("Location", "/agent/triggers/"+t.TriggerID)
	writeVersioned(w, http.StatusCreated, t.Version, t)
}

// saveTrigger writes t over version expected, answering the request
// itself when it cannot.
func (g *API) saveTrigger(w http.ResponseWriter, r *http.Request, t agents.Trigger, expected int64) bool {
	d, err := t.Definition()
	if err == nil {
		err = g.store.PutDefinition(r.Context(), d, expected)
	}
	return !g.definitionError(w, err, "trigger")
}

// listTriggers answers the tenant's triggers in evaluation order
// (priority, then id), optionally only those of one agent, event type or
// status.
func (g *API) listTriggers(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	all, err := Triggers(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "trigger") {
		return
	}
	q := r.URL.Query()
	for param, get := range map[string]func(agents.Trigger) string{
		"agent_id":   func(t agents.Trigger) string { return t.AgentID },
		"event_type": func(t agents.Trigger) string { return t.EventType },
		"status":     func(t agents.Trigger) string { return t.Status },
	} {
		if want := q.Get(param); want != "" {
			all = slices.DeleteFunc(all, func(t agents.Trigger) bool { return get(t) != want })
		}
	}
	slices.SortStableFunc(all, func(a, b agents.Trigger) int { return a.PriorityValue() - b.PriorityValue() })
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"triggers": all})
}

// loadTrigger reads the tenant's trigger named in the path.
func (g *API) loadTrigger(w http.ResponseWriter, r *http.Request) (agents.Trigger, bool) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return agents.Trigger{}, false
	}
	id, ok := pathID(w, r, "trigger_id", "trigger")
	if !ok {
		return agents.Trigger{}, false
	}
	d, err := g.store.GetDefinition(r.Context(), tenant, store.KindTrigger, id)
	if g.definitionError(w, err, "trigger") {
		return agents.Trigger{}, false
	}
	t, err := agents.TriggerOf(d)
	if g.definitionError(w, err, "trigger") {
		return agents.Trigger{}, false
	}
	return t, true
}

func (g *API) getTrigger(w http.ResponseWriter, r *http.Request) {
	if t, ok := g.loadTrigger(w, r); ok {
		writeVersioned(w, http.StatusOK, t.Version, t)
	}
}

func (g *API) putTrigger(w http.ResponseWriter, r *http.Request) {
	var body TriggerBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	expected, ok := expectedVersion(w, r, body.Version)
	if !ok {
		return
	}
	cur, ok := g.loadTrigger(w, r)
	if !ok {
		return
	}
	if cur.Version != expected {
		handlers.WriteError(w, http.StatusConflict, "version_conflict", "trigger is at another version: read it again and retry with its version")
		return
	}
	body.Normalize()
	if !g.checkTrigger(w, r, cur.TenantID, &body.TriggerSpec) {
		return
	}
	g.replaceTrigger(w, r, cur, body.TriggerSpec)
}

// replaceTrigger writes spec as the next version of cur.
func (g *API) replaceTrigger(w http.ResponseWriter, r *http.Request, cur agents.Trigger, spec agents.TriggerSpec) {
	next := agents.Trigger{TriggerID: cur.TriggerID, TenantID: cur.TenantID, TriggerSpec: spec, Version: cur.Version + 1,
		CreatedAt: cur.CreatedAt, UpdatedAt: g.cfg.Now()}
	if g.saveTrigger(w, r, next, cur.Version) {
		writeVersioned(w, http.StatusOK, next.Version, next)
	}
}

func (g *API) enableTrigger(w http.ResponseWriter, r *http.Request) {
	g.setTriggerStatus(w, r, agents.StatusActive)
}

func (g *API) disableTrigger(w http.ResponseWriter, r *http.Request) {
	g.setTriggerStatus(w, r, agents.StatusInactive)
}

// setTriggerStatus enables or disables a trigger: a new version unless it
// is already so (then the current one answers). If-Match, when sent, must
// name the current version.
func (g *API) setTriggerStatus(w http.ResponseWriter, r *http.Request, status string) {
	expected, err := ifMatch(r)
	if err != nil {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	cur, ok := g.loadTrigger(w, r)
	if !ok {
		return
	}
	switch {
	case expected != 0 && expected != cur.Version:
		handlers.WriteError(w, http.StatusConflict, "version_conflict", "trigger is at another version: read it again and retry with its version")
	case cur.Status == status:
		writeVersioned(w, http.StatusOK, cur.Version, cur)
	default:
		spec := cur.TriggerSpec
		spec.Status = status
		g.replaceTrigger(w, r, cur, spec)
	}
}

func (g *API) deleteTrigger(w http.ResponseWriter, r *http.Request) {
	expected, err := ifMatch(r)
	if err != nil {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	t, ok := g.loadTrigger(w, r)
	if !ok {
		return
	}
	err = g.store.DeleteDefinition(r.Context(), t.TenantID, store.KindTrigger, t.TriggerID, expected)
	if g.definitionError(w, err, "trigger") {
		return
	}
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"trigger_id": t.TriggerID, "deleted": true})
}
