package defs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/store"
)

// Lister lists a tenant's definitions of one kind.
type Lister interface {
	ListDefinitions(ctx context.Context, tenantID, kind string) ([]store.Definition, error)
}

// Store keeps the tenants' versioned definitions: a write or a delete
// names the version it expects (store.ErrConflict otherwise).
type Store interface {
	handlers.DefinitionReader
	Lister
	PutDefinition(ctx context.Context, d store.Definition, expected int64) error
	DeleteDefinition(ctx context.Context, tenantID, kind, id string, expected int64) error
}

// Config is what the definitions API takes from the ingress that serves
// it: how a request is scoped and its body read, under the ingress's
// rules, and the settings of its tools.
type Config struct {
	// Tenant is the tenant a request is scoped to, or false once it
	// answered the request itself (required).
	Tenant func(w http.ResponseWriter, r *http.Request) (string, bool)
	// Decode decodes a JSON body strictly into v, within the ingress's
	// size and time limits, or answers the request itself and reports
	// false (required).
	Decode func(w http.ResponseWriter, r *http.Request, v any) bool
	// Now is the clock of the documents the API writes; default
	// time.Now in UTC.
	Now func() time.Time
	// ToolSecrets keeps the webhook tools' secrets; nil (or one without
	// a key) refuses to create webhook tools (503 secrets_unavailable).
	ToolSecrets ToolSecrets
	// Egress judges a webhook tool's URL when it is written; nil is
	// egress.Default().
	Egress *egress.Policy
}

// API serves the definitions API: the tenant's agents, triggers, tools
// and skills.
type API struct {
	store Store
	log   zerolog.Logger
	cfg   Config
}

// New returns the definitions API over st.
func New(st Store, log zerolog.Logger, cfg Config) *API {
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Now().UTC() }
	}
	return &API{store: st, log: log, cfg: cfg}
}

// Routes registers the definitions API on mux.
func (g *API) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /agent/agents", g.createAgent)
	mux.HandleFunc("GET /agent/agents", g.listAgents)
	mux.HandleFunc("GET /agent/agents/{agent_id}", g.getAgent)
	mux.HandleFunc("PUT /agent/agents/{agent_id}", g.putAgent)
	mux.HandleFunc("DELETE /agent/agents/{agent_id}", g.deleteAgent)
	mux.HandleFunc("POST /agent/triggers", g.createTrigger)
	mux.HandleFunc("GET /agent/triggers", g.listTriggers)
	mux.HandleFunc("GET /agent/triggers/{trigger_id}", g.getTrigger)
	mux.HandleFunc("PUT /agent/triggers/{trigger_id}", g.putTrigger)
	mux.HandleFunc("DELETE /agent/triggers/{trigger_id}", g.deleteTrigger)
	mux.HandleFunc("POST /agent/triggers/{trigger_id}/enable", g.enableTrigger)
	mux.HandleFunc("POST /agent/triggers/{trigger_id}/disable", g.disableTrigger)
	g.toolRoutes(mux)
	g.skillRoutes(mux)
}

// list loads the tenant's definitions of kind, each read by of.
func list[T any](ctx context.Context, st Lister, tenant, kind string, of func(store.Definition) (T, error)) ([]T, error) {
	defs, err := st.ListDefinitions(ctx, tenant, kind)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(defs))
	for _, d := range defs {
		v, err := of(d)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// DefinitionError is the error body of the definitions API: the stable
// code and message of every API error, and the field a validation error
// concerns.
type DefinitionError struct {
	Error agents.Error `json:"error"`
}

// WriteInvalid answers a validation error: 400 with its code and field.
func WriteInvalid(w http.ResponseWriter, e *agents.Error) {
	handlers.WriteJSON(w, http.StatusBadRequest, DefinitionError{Error: *e})
}

// newDefinitionID returns a fresh, time-ordered id: prefix and a UUIDv7.
func newDefinitionID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return prefix + "-" + id.String()
}

// pathID is a definition's id from the path; one that cannot name a
// definition is not found.
func pathID(w http.ResponseWriter, r *http.Request, name, what string) (string, bool) {
	id := r.PathValue(name)
	if !agents.ValidID(id) {
		handlers.WriteError(w, http.StatusNotFound, "not_found", what+" not found")
		return "", false
	}
	return id, true
}

// ifMatch parses If-Match: a version, quoted or not, weak or not. It
// returns 0 without the header.
func ifMatch(r *http.Request) (int64, error) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" {
		return 0, nil
	}
	h = strings.Trim(strings.TrimPrefix(h, "W/"), `"`)
	v, err := strconv.ParseInt(h, 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("If-Match must be a version, for example \"3\"")
	}
	return v, nil
}

// expectedVersion is the version a PUT replaces: If-Match or the body's
// version (which must agree when both are given). It answers the request
// itself when there is none or they disagree.
func expectedVersion(w http.ResponseWriter, r *http.Request, body int64) (int64, bool) {
	header, err := ifMatch(r)
	switch {
	case err != nil:
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case body < 0:
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", "version must be at least 1")
	case header != 0 && body != 0 && header != body:
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", "If-Match and the body's version disagree")
	case header == 0 && body == 0:
		handlers.WriteError(w, http.StatusPreconditionRequired, "version_required",
			"name the version you replace: If-Match: \"<version>\" or \"version\" in the body")
	default:
		return max(header, body), true
	}
	return 0, false
}

// writeVersioned answers a definition with its version as the ETag.
func writeVersioned(w http.ResponseWriter, status int, version int64, v any) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	handlers.WriteJSON(w, status, v)
}

// definitionError answers a store error of the definitions API; it
// returns false for nil.
func (g *API) definitionError(w http.ResponseWriter, err error, what string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		handlers.WriteError(w, http.StatusNotFound, "not_found", what+" not found")
	case errors.Is(err, store.ErrConflict):
		handlers.WriteError(w, http.StatusConflict, "version_conflict",
			what+" was changed or created by another request: read it again and retry with its version")
	case errors.Is(err, store.ErrSchema), errors.Is(err, store.ErrInvalidArgument):
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
	default:
		g.log.Error().Err(err).Str("definition", what).Msg("definition store")
		handlers.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the store could not be reached")
	}
	return true
}

// underLimit answers 409 limit_reached when the tenant has as many
// definitions of a kind as a list returns.
func underLimit(w http.ResponseWriter, n int, what string) bool {
	if n >= store.MaxListDefinitions {
		handlers.WriteError(w, http.StatusConflict, "limit_reached", fmt.Sprintf("a tenant has at most %d %ss", store.MaxListDefinitions, what))
		return false
	}
	return true
}
