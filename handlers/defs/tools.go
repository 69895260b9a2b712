package defs

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/store"
)

// The tools API (seed 002): the tenant's custom tools at /agent/tools,
// with the same versioning as agents and triggers (ETag, If-Match or the
// body's version, 409 version_conflict). GET /agent/tools lists the
// system tools too (type system, read only: a write to one is 403
// system_tool_read_only). A webhook tool's secret is written with the
// tool ("secret" in the body, required on create, optional on update)
// and never answered: it is stored encrypted by ToolSecrets, apart from
// the definition document. A webhook URL the egress policy refuses (its
// host is, or resolves only to, a refused address) is answered 400
// egress_denied, on create and on update.

// ToolSecrets keeps the webhook tools' secrets (tools.Secrets).
type ToolSecrets interface {
	// Ready reports whether secrets can be stored (a key is configured).
	Ready() bool
	Put(ctx context.Context, tenant, toolID, secret string) error
	Delete(ctx context.Context, tenant, toolID string) error
}

// ToolBody is the body of POST /agent/tools and PUT /agent/tools/{id}:
// the tool's fields, its write-only secret and, on a PUT, the version it
// replaces unless If-Match names it.
type ToolBody struct {
	agents.ToolSpec
	Secret  *string `json:"secret,omitempty"`
	Version int64   `json:"version,omitempty"`
}

// toolRoutes registers the tools API on mux.
func (g *API) toolRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /agent/tools", g.createTool)
	mux.HandleFunc("GET /agent/tools", g.listTools)
	mux.HandleFunc("GET /agent/tools/{tool_id}", g.getTool)
	mux.HandleFunc("PUT /agent/tools/{tool_id}", g.putTool)
	mux.HandleFunc("DELETE /agent/tools/{tool_id}", g.deleteTool)
}

// tenantTools loads the tenant's custom tools.
func tenantTools(ctx context.Context, st Lister, tenant string) ([]agents.Tool, error) {
	return list(ctx, st, tenant, store.KindTool, agents.ToolOf)
}

// checkTool validates a normalized spec of tool id (its name unique among
// the tenant's tools) and its secret, answering the request itself when
// it fails. It returns how many tools the tenant has.
func (g *API) checkTool(w http.ResponseWriter, r *http.Request, tenant, id string, body *ToolBody, create bool) (int, bool) {
	if err := body.Validate(); err != nil {
		WriteInvalid(w, err)
		return 0, false
	}
	if err := g.cfg.Egress.CheckURL(r.Context(), body.Handler.URL); errors.Is(err, egress.ErrDenied) {
		handlers.WriteError(w, http.StatusBadRequest, egress.Code, "handler.url: "+err.Error())
		return 0, false
	}
	if create || body.Secret != nil {
		if err := agents.ValidateSecret(deref(body.Secret), body.Secret != nil); err != nil {
			WriteInvalid(w, err)
			return 0, false
		}
		if g.cfg.ToolSecrets == nil || !g.cfg.ToolSecrets.Ready() {
			handlers.WriteError(w, http.StatusServiceUnavailable, "secrets_unavailable",
				"webhook secrets cannot be stored: the service has no secrets key (SECRETS_KEY)")
			return 0, false
		}
	}
	all, err := tenantTools(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "tool") {
		return 0, false
	}
	names := make(map[string]string, len(all))
	for _, t := range all {
		names[t.ToolID] = t.Name
	}
	if err := agents.CheckToolName(id, body.Name, names); err != nil {
		handlers.WriteJSON(w, http.StatusConflict, DefinitionError{Error: *err})
		return 0, false
	}
	return len(all), true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (g *API) createTool(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	var body ToolBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	if body.Version != 0 {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", "a new tool has no version: it gets version 1")
		return
	}
	body.Normalize()
	id := newDefinitionID("tool")
	n, ok := g.checkTool(w, r, tenant, id, &body, true)
	if !ok || !underLimit(w, n, "tool") {
		return
	}
	// The secret first: a stored tool always has one.
	if err := g.cfg.ToolSecrets.Put(r.Context(), tenant, id, *body.Secret); err != nil {
		g.log.Error().Err(err).Str("tool_id", id).Msg("store tool secret")
		handlers.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the tool's secret could not be stored")
		return
	}
	now := g.cfg.Now()
	t := agents.Tool{ToolID: id, TenantID: tenant, Type: agents.ToolTypeCustom, ToolSpec: body.ToolSpec, Version: 1,
		CreatedAt: now, UpdatedAt: now}
	if !g.saveTool(w, r, t, 0) {
		_ = g.cfg.ToolSecrets.Delete(r.Context(), tenant, id)
		return
	}
	w.Header().Set("Location", "/agent/tools/"+id)
	writeVersioned(w, http.StatusCreated, t.Version, t)
}

func (g *API) saveTool(w http.ResponseWriter, r *http.Request, t agents.Tool, expected int64) bool {
	d, err := t.Definition()
	if err == nil {
		err = g.store.PutDefinition(r.Context(), d, expected)
	}
	return !g.definitionError(w, err, "tool")
}

func (g *API) listTools(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	custom, err := tenantTools(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "tool") {
		return
	}
	all := append(slices.Clone(agents.SystemTools), custom...)
	if typ := r.URL.Query().Get("type"); typ != "" {
		all = slices.DeleteFunc(all, func(t agents.Tool) bool { return t.Type != typ })
	}
	if status := r.URL.Query().Get("status"); status != "" {
		all = slices.DeleteFunc(all, func(t agents.Tool) bool { return t.Status != status })
	}
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"tools": all})
}

// systemToolID reports whether the path names a system tool, answering
// the request with it (GET) or refusing the write.
func systemToolID(w http.ResponseWriter, r *http.Request) bool {
	name, ok := strings.CutPrefix(r.PathValue("tool_id"), "system-")
	if !ok {
		return false
	}
	t, found := agents.SystemTool(name)
	switch {
	case !found:
		handlers.WriteError(w, http.StatusNotFound, "not_found", "tool not found")
	case r.Method == http.MethodGet:
		handlers.WriteJSON(w, http.StatusOK, t)
	default:
		handlers.WriteError(w, http.StatusForbidden, "system_tool_read_only", "system tools cannot be changed or deleted")
	}
	return true
}

// loadTool reads the tenant's custom tool named in the path.
func (g *API) loadTool(w http.ResponseWriter, r *http.Request) (agents.Tool, bool) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return agents.Tool{}, false
	}
	id, ok := pathID(w, r, "tool_id", "tool")
	if !ok {
		return agents.Tool{}, false
	}
	d, err := g.store.GetDefinition(r.Context(), tenant, store.KindTool, id)
	if g.definitionError(w, err, "tool") {
		return agents.Tool{}, false
	}
	t, err := agents.ToolOf(d)
	if g.definitionError(w, err, "tool") {
		return agents.Tool{}, false
	}
	return t, true
}

func (g *API) getTool(w http.ResponseWriter, r *http.Request) {
	if systemToolID(w, r) {
		return
	}
	if t, ok := g.loadTool(w, r); ok {
		writeVersioned(w, http.StatusOK, t.Version, t)
	}
}

func (g *API) putTool(w http.ResponseWriter, r *http.Request) {
	if _, ok := g.cfg.Tenant(w, r); !ok || systemToolID(w, r) {
		return
	}
	var body ToolBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	expected, ok := expectedVersion(w, r, body.Version)
	if !ok {
		return
	}
	cur, ok := g.loadTool(w, r)
	if !ok {
		return
	}
	if cur.Version != expected {
		handlers.WriteError(w, http.StatusConflict, "version_conflict", "tool is at another version: read it again and retry with its version")
		return
	}
	body.Normalize()
	if _, ok := g.checkTool(w, r, cur.TenantID, cur.ToolID, &body, false); !ok {
		return
	}
	next := agents.Tool{ToolID: cur.ToolID, TenantID: cur.TenantID, Type: agents.ToolTypeCustom, ToolSpec: body.ToolSpec,
		Version: expected + 1, CreatedAt: cur.CreatedAt, UpdatedAt: g.cfg.Now()}
	if !g.saveTool(w, r, next, expected) {
		return
	}
	if body.Secret != nil {
		if err := g.cfg.ToolSecrets.Put(r.Context(), cur.TenantID, cur.ToolID, *body.Secret); err != nil {
			g.log.Error().Err(err).Str("tool_id", cur.ToolID).Msg("store tool secret")
			handlers.WriteError(w, http.StatusServiceUnavailable, "store_unavailable",
				"the tool was updated but its new secret could not be stored: send the secret again")
			return
		}
	}
	writeVersioned(w, http.StatusOK, next.Version, next)
}

func (g *API) deleteTool(w http.ResponseWriter, r *http.Request) {
	if _, ok := g.cfg.Tenant(w, r); !ok || systemToolID(w, r) {
		return
	}
	expected, err := ifMatch(r)
	if err != nil {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	t, ok := g.loadTool(w, r)
	if !ok {
		return
	}
	all, err := Agents(r.Context(), g.store, t.TenantID)
	if g.definitionError(w, err, "agent") {
		return
	}
	for _, a := range all {
		if slices.Contains(a.Tools, t.Name) {
			handlers.WriteError(w, http.StatusConflict, "tool_in_use", "agent "+a.AgentID+" lists this tool")
			return
		}
	}
	err = g.store.DeleteDefinition(r.Context(), t.TenantID, store.KindTool, t.ToolID, expected)
	if g.definitionError(w, err, "tool") {
		return
	}
	if g.cfg.ToolSecrets != nil {
		if err := g.cfg.ToolSecrets.Delete(r.Context(), t.TenantID, t.ToolID); err != nil {
			g.log.Warn().Err(err).Str("tool_id", t.ToolID).Msg("delete tool secret")
		}
	}
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"tool_id": t.ToolID, "deleted": true})
}
