package ingress

import (
	"net/http"
	"time"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// ExecutionList is the answer of GET /agent/executions.
type ExecutionList struct {
	Executions []store.Execution `json:"executions"`
}

// listExecutions serves GET /agent/executions: the tenant's execution
// records, newest first, filtered by agent_id, session_id, status
// (success, failed, timeout) and since (RFC 3339), at most limit. A
// user-bound credential sees only its own runs' records, as with GET
// /agent/sessions. The list leaves out the records' payload records (a
// record may hold store.MaxExecutionPayloadBytes of them): GET one record
// for them.
func (g *Ingress) listExecutions(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	qv := r.URL.Query()
	q := store.ExecutionQuery{TenantID: tenant, AgentID: qv.Get("agent_id"), SessionID: qv.Get("session_id"), Status: qv.Get("status")}
	switch q.Status {
	case "", store.ExecutionSuccess, store.ExecutionFailed, store.ExecutionTimeout:
	default:
		WriteError(w, http.StatusBadRequest, "invalid_request", "status must be success, failed or timeout")
		return
	}
	if q.AgentID != "" && !agents.ValidID(q.AgentID) {
		WriteError(w, http.StatusBadRequest, "invalid_request", "agent_id is not a valid id")
		return
	}
	if q.SessionID != "" && orch.ValidateID("session_id", q.SessionID) != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", "session_id is not a valid id")
		return
	}
	if v := qv.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "invalid_request", "since must be an RFC 3339 time")
			return
		}
		q.Since = t
	}
	if q.Limit, ok = queryLimit(w, qv.Get("limit"), store.MaxExecutionLimit); !ok {
		return
	}
	if c := callerOf(r.Context()); c.bound {
		q.UserID = c.UserID
	}
	list, err := g.store.ListExecutions(r.Context(), q)
	if g.storeError(w, err, "executions") {
		return
	}
	if list == nil {
		list = []store.Execution{}
	}
	for i := range list {
		list[i] = list[i].WithoutPayloads() // GET one record for them
	}
	WriteJSON(w, http.StatusOK, ExecutionList{Executions: list})
}

// getExecution serves GET /agent/executions/{execution_id}: one of the
// tenant's records (another tenant's, or another user's for a
// user-bound credential, is 404).
func (g *Ingress) getExecution(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	e, err := g.store.GetExecution(r.Context(), tenant, r.PathValue("execution_id"))
	if err == nil {
		if c := callerOf(r.Context()); c.bound && c.UserID != "" && e.UserID != c.UserID {
			err = store.ErrNotFound
		}
	}
	if g.storeError(w, err, "execution") {
		return
	}
	WriteJSON(w, http.StatusOK, e)
}
