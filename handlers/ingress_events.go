package handlers

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/orch"
)

// InboundEvent is the body of POST /agent/events: an event of the
// tenant's (seed 002's message.new, schedule, webhook or manual) that its
// triggers are evaluated against. Data is what the conditions see (dotted
// fields: "message.text" is Data["message"]["text"]). Message is the task
// of the run a matching trigger starts; it defaults to Data's
// message.text. EventID, when set, makes the submission idempotent: the
// same event id of the tenant starts one run, whatever the retries.
type InboundEvent struct {
	EventID   string         `json:"event_id,omitempty"`
	EventType string         `json:"event_type"`
	UserID    string         `json:"user_id,omitempty"`
	SessionID string         `json:"session_id"`
	Message   string         `json:"message,omitempty"`
	Data      map[string]any `json:"data,omitempty"`
}

// InboundResult answers POST /agent/events: whether a trigger matched
// and, if one did, the run it started (follow it with GET
// /agent/plans/{plan_id} or the run's stream).
type InboundResult struct {
	Matched   bool   `json:"matched"`
	Evaluated int    `json:"triggers_evaluated"`
	TriggerID string `json:"trigger_id,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	PlanID    string `json:"plan_id,omitempty"`
}

// inboundNamespace derives a run id from a tenant's event id.
var inboundNamespace = uuid.MustParse("0b6f1e58-3c1e-4d55-9a53-8d1f1b6a2c47")

// inboundEvent serves POST /agent/events: it evaluates the tenant's
// enabled triggers of the event's type against its data, in priority
// order, and starts a run as the agent of the first match whose agent is
// active (202). No match answers 200 with matched false. The run is not
// awaited. In an existing session the run continues with the session's
// current agent (agent_id says which); a session handed off to a human
// or completed takes no run (409 session_handed_off, session_completed).
func (g *Ingress) inboundEvent(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	var in InboundEvent
	if !g.decodeBody(w, r, &in) {
		return
	}
	user, ok := userScope(w, r, in.UserID)
	if !ok {
		return
	}
	if in.Message == "" {
		if m, ok := in.Data["message"].(map[string]any); ok {
			in.Message, _ = m["text"].(string)
		}
	}
	switch {
	case !slices.Contains(agents.EventTypes, in.EventType):
		writeInvalid(w, &agents.Error{Code: agents.CodeInvalidEventType, Field: "event_type",
			Message: "event_type must be one of " + strings.Join(agents.EventTypes, ", ")})
		return
	case orch.ValidateID("session_id", in.SessionID) != nil:
		writeError(w, http.StatusBadRequest, "invalid_request", "session_id must match [A-Za-z0-9_-]{1,64}")
		return
	case in.EventID != "" && !agents.ValidID(in.EventID):
		writeError(w, http.StatusBadRequest, "invalid_request", "event_id must match [A-Za-z0-9_-]{1,64}")
		return
	}
	triggers, err := g.tenantTriggers(r.Context(), tenant)
	if g.definitionError(w, err, "trigger") {
		return
	}
	res := InboundResult{Evaluated: len(triggers)}
	for _, t := range agents.Match(triggers, in.EventType, in.Data) {
		_, err := LoadAgent(r.Context(), g.store, tenant, t.AgentID)
		var refused *agents.Error
		if errors.As(err, &refused) {
			continue // its agent cannot run now: the next match may
		}
		if g.definitionError(w, err, "agent") {
			return
		}
		res.Matched, res.TriggerID, res.AgentID = true, t.TriggerID, t.AgentID
		break
	}
	if !res.Matched {
		writeJSON(w, http.StatusOK, res)
		return
	}
	// An existing session continues with its current agent (seed 002
	// step 6); a handed-off or completed one takes no run.
	cont, code, err := g.sessionAgent(r.Context(), orch.RunRequest{TenantID: tenant, SessionID: in.SessionID})
	if code != "" {
		writeError(w, statusOf(code), code, err.Error())
		return
	}
	if cont != "" {
		res.AgentID = cont
	}
	req := orch.RunRequest{RunID: uuid.NewString(), TenantID: tenant, UserID: user, SessionID: in.SessionID,
		Message: in.Message, AgentID: res.AgentID}
	if in.EventID != "" {
		// The run's id is its event's: a retried event is the same
		// run.requested, which the stream's duplicate window drops.
		req.RunID = uuid.NewSHA1(inboundNamespace, []byte(tenant+"/"+in.EventID)).String()
	}
	if req.UserID == "" {
		req.UserID = res.TriggerID // the run is the trigger's, on no user's behalf
	}
	if err := orch.ValidateRequest(req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if !g.admit(w, r, tenant, req.RunID) {
		return
	}
	pending, err := g.runs.Submit(r.Context(), req)
	if err != nil {
		g.release(orch.RunResult{RunID: req.RunID, TenantID: tenant})
		g.log.Error().Err(err).Str("run_id", req.RunID).Msg("publish run.requested for a trigger")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the run could not be queued")
		return
	}
	pending.Close()
	g.log.Info().Str("run_id", req.RunID).Str("tenant_id", tenant).Str("trigger_id", res.TriggerID).
		Str("agent_id", res.AgentID).Str("event_type", in.EventType).Msg("run started by a trigger")
	res.RunID, res.PlanID = req.RunID, orch.PlanID(req.RunID)
	writeJSON(w, http.StatusAccepted, res)
}
