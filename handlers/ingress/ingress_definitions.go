package ingress

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/store"
)

// The definitions API (seed 002): the tenant's agents at /agent/agents and
// triggers at /agent/triggers, each created with POST, listed and read
// with GET, replaced with PUT and deleted with DELETE. Every route is
// scoped to the caller's tenant; another tenant's definition is not found,
// exactly like a missing one. POST /agent/events (ingress_events.go) runs
// the tenant's triggers on an inbound event.
//
// Definitions are versioned: each write bumps version, answered in the
// body and as the ETag. A PUT names the version it replaces, in If-Match
// or as "version" in the body (428 version_required without either); a
// stale one is 409 version_conflict, so two editors never overwrite each
// other. A DELETE may name it too.

// definitionRoutes registers the definitions API on mux.
func (g *Ingress) definitionRoutes(mux *http.ServeMux) {
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
	mux.HandleFunc("POST /agent/events", g.inboundEvent)
	mux.HandleFunc("GET /agent/events/{event_id}", g.eventEvaluations)
}

// DefinitionError is the error body of the definitions API: the stable
// code and message of every API error, and the field a validation error
// concerns.
type DefinitionError struct {
	Error agents.Error `json:"error"`
}

// writeInvalid answers a validation error: 400 with its code and field.
func writeInvalid(w http.ResponseWriter, e *agents.Error) {
	WriteJSON(w, http.StatusBadRequest, DefinitionError{Error: *e})
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
		WriteError(w, http.StatusNotFound, "not_found", what+" not found")
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
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case body < 0:
		WriteError(w, http.StatusBadRequest, "invalid_request", "version must be at least 1")
	case header != 0 && body != 0 && header != body:
		WriteError(w, http.StatusBadRequest, "invalid_request", "If-Match and the body's version disagree")
	case header == 0 && body == 0:
		WriteError(w, http.StatusPreconditionRequired, "version_required",
			"name the version you replace: If-Match: \"<version>\" or \"version\" in the body")
	default:
		return max(header, body), true
	}
	return 0, false
}

// writeVersioned answers a definition with its version as the ETag.
func writeVersioned(w http.ResponseWriter, status int, version int64, v any) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	WriteJSON(w, status, v)
}

// definitionError answers a store error of the definitions API; it
// returns false for nil.
func (g *Ingress) definitionError(w http.ResponseWriter, err error, what string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, http.StatusNotFound, "not_found", what+" not found")
	case errors.Is(err, store.ErrConflict):
		WriteError(w, http.StatusConflict, "version_conflict",
			what+" was changed or created by another request: read it again and retry with its version")
	case errors.Is(err, store.ErrSchema), errors.Is(err, store.ErrInvalidArgument):
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
	default:
		g.log.Error().Err(err).Str("definition", what).Msg("definition store")
		WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the store could not be reached")
	}
	return true
}

// underLimit answers 409 limit_reached when the tenant has as many
// definitions of a kind as a list returns.
func underLimit(w http.ResponseWriter, n int, what string) bool {
	if n >= store.MaxListDefinitions {
		WriteError(w, http.StatusConflict, "limit_reached", fmt.Sprintf("a tenant has at most %d %ss", store.MaxListDefinitions, what))
		return false
	}
	return true
}
