package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// The Sessions API of seed 002 (sessions.get is GET
// /agent/sessions/{session_id}): GET /agent/sessions lists a tenant's
// sessions from the agent_sessions projection, and POST
// /agent/sessions/{session_id}/handoff is an operator's handoff, written
// to the sessions bucket (the authority) with compare-and-swap.

// SessionHandoffRequest is the body of POST
// /agent/sessions/{session_id}/handoff: to a human (the session parks
// until a reply) or to another agent (the session's next run acts as it).
// By is who hands it off (the credential's user when it names one).
type SessionHandoffRequest struct {
	TargetType    string `json:"target_type"`
	TargetAgentID string `json:"target_agent_id,omitempty"`
	Reason        string `json:"reason"`
	Priority      string `json:"priority,omitempty"`
	By            string `json:"by,omitempty"`
}

// SessionHandoffResult answers POST /agent/sessions/{session_id}/handoff:
// the session's status and current agent after the handoff.
type SessionHandoffResult struct {
	SessionID    string   `json:"session_id"`
	Status       string   `json:"status"`
	AgentID      string   `json:"agent_id,omitempty"`
	HandoffDepth int      `json:"handoff_depth"`
	HandoffChain []string `json:"handoff_chain,omitempty"`
	By           string   `json:"by"`
}

// SessionList answers GET /agent/sessions. Sessions are listed without
// their messages (GET /agent/sessions/{session_id} has them).
type SessionList struct {
	Sessions []store.Session `json:"sessions"`
}

// OperatorHandoff is the trigger of a human handoff an operator asked for.
const OperatorHandoff = "operator"

// Session handoff error codes.
const (
	// CodeHandoffRefused: the session's current agent cannot hand off to
	// the target (not in its sub_agents, depth past 3, a cycle).
	CodeHandoffRefused = "handoff_refused"
)

var handoffPriorities = []string{"low", "normal", "high", "urgent"}

// listSessions serves GET /agent/sessions?status=&agent_id=&limit=: the
// tenant's sessions newest first (a credential bound to a user sees its
// own). status is active, handed_off or completed (handed_off is the
// human operators' queue).
func (g *Ingress) listSessions(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	qv := r.URL.Query()
	q := store.SessionQuery{TenantID: tenant, Status: qv.Get("status"), AgentID: qv.Get("agent_id")}
	switch q.Status {
	case "", orch.SessionActive, orch.SessionHandedOff, orch.SessionCompleted:
	default:
		WriteError(w, http.StatusBadRequest, "invalid_request", "status must be active, handed_off or completed")
		return
	}
	if q.AgentID != "" && !agents.ValidID(q.AgentID) {
		WriteError(w, http.StatusBadRequest, "invalid_request", "agent_id is not a valid id")
		return
	}
	if q.Limit, ok = queryLimit(w, qv.Get("limit"), store.MaxSessionLimit); !ok {
		return
	}
	if c := callerOf(r.Context()); c.bound {
		q.UserID = c.UserID
	}
	list, err := g.store.ListSessions(r.Context(), q)
	if g.storeError(w, err, "sessions") {
		return
	}
	for i := range list {
		list[i].Messages = nil
	}
	WriteJSON(w, http.StatusOK, SessionList{Sessions: list})
}

// handoffSession serves POST /agent/sessions/{session_id}/handoff. To a
// human: the session is handed_off with a packet (trigger operator) and
// session.handoff.human goes to its trace; new runs are refused until a
// reply (POST .../reply), which resumes it. To an agent: the session's
// current agent must name the target in its sub_agents, within the depth
// limit and without a cycle (orch.HandoffRefusal, the decider's rule);
// the session's next run acts as the target. 404 for another tenant's
// session; 409 session_handed_off, session_completed or handoff_refused.
func (g *Ingress) handoffSession(w http.ResponseWriter, r *http.Request) {
	tenant, sess, ok := g.callerSession(w, r)
	if !ok {
		return
	}
	id, c := sess.SessionID, callerOf(r.Context())
	var body SessionHandoffRequest
	if !g.decodeBody(w, r, &body) {
		return
	}
	body.By = cmp.Or(c.UserID, body.By, r.Header.Get("X-User-Id"))
	if code, msg := checkHandoffRequest(&body); code != "" {
		WriteError(w, http.StatusBadRequest, code, msg)
		return
	}
	var err error
	change, audit := g.toHuman(tenant, body)
	if body.TargetType == orch.HandoffToAgent {
		change, audit, err = g.toAgent(r.Context(), tenant, sess, body)
	}
	var rev uint64
	if err == nil {
		sess, rev, err = g.cfg.Sessions.Update(r.Context(), tenant, id, change)
	}
	var refused *sessionRefused
	switch {
	case errors.As(err, &refused):
		refused.write(w)
		return
	case g.storeError(w, err, "session"):
		return
	}
	g.publishSession(r.Context(), sess, rev, body.By, audit)
	g.log.Info().Str("session_id", id).Str("target_type", body.TargetType).Str("agent_id", sess.AgentID).
		Str("by", body.By).Msg("operator handed a session off")
	WriteJSON(w, http.StatusOK, SessionHandoffResult{SessionID: id, Status: sess.State, AgentID: sess.AgentID,
		HandoffDepth: sess.HandoffDepth, HandoffChain: sess.HandoffChain, By: body.By})
}

// checkHandoffRequest validates an operator handoff's body, returning the
// error code and message of a bad one.
func checkHandoffRequest(b *SessionHandoffRequest) (string, string) {
	switch {
	case b.TargetType != orch.HandoffToAgent && b.TargetType != orch.HandoffToHuman:
		return "invalid_request", "target_type must be agent or human"
	case strings.TrimSpace(b.Reason) == "" || len(b.Reason) > 2000:
		return "invalid_request", "reason is required, at most 2000 bytes"
	case b.By == "" || len(b.By) > 128:
		return "invalid_request", "by (who hands off) is required, at most 128 characters"
	case b.TargetType == orch.HandoffToAgent && b.TargetAgentID == "":
		return "invalid_request", "target_agent_id is required to hand off to an agent"
	case b.TargetType == orch.HandoffToHuman && b.TargetAgentID != "":
		return "invalid_request", "target_agent_id names no human; leave it out"
	case b.Priority != "" && !slices.Contains(handoffPriorities, b.Priority):
		return "invalid_request", "priority must be one of " + strings.Join(handoffPriorities, ", ")
	}
	return "", ""
}

// sessionRefused is an operator change the session refuses, answered
// 409 with its code and message.
type sessionRefused struct{ code, msg string }

// write answers the refusal.
func (e *sessionRefused) write(w http.ResponseWriter) {
	WriteError(w, http.StatusConflict, e.code, e.msg)
}

func (e *sessionRefused) Error() string { return e.code + ": " + e.msg }

// sessionOpen refuses a change to a session that is not active.
func sessionOpen(s *store.Session) error {
	switch s.State {
	case orch.SessionHandedOff:
		return &sessionRefused{code: orch.SessionRefusedHandedOff, msg: "the session is already handed off to a human"}
	case orch.SessionCompleted:
		return &sessionRefused{code: orch.SessionRefusedCompleted, msg: "the session is completed"}
	}
	return nil
}

// toHuman is an operator's handoff to a human: the change parks the
// session with a packet no run waits on (a reply resumes the session
// itself), and the trace gets session.handoff.human.
func (g *Ingress) toHuman(tenant string, b SessionHandoffRequest) (func(*store.Session) error, sessionAudit) {
	at := g.now()
	priority := cmp.Or(b.Priority, "normal")
	var agentsInvolved []string
	change := func(s *store.Session) error {
		if err := sessionOpen(s); err != nil {
			return err
		}
		agentsInvolved = sessionChain(*s)
		s.State, s.LastActive = orch.SessionHandedOff, at
		s.Handoff = &store.SessionHandoff{Reason: b.Reason, Priority: priority, Summary: sessionSummary(*s),
			Agents: agentsInvolved, Trigger: OperatorHandoff, At: at}
		return nil
	}
	return change, func(s store.Session) orch.Audit {
		return orch.Audit{Name: "session.handoff.human", Payload: map[string]any{"tenant_id": tenant, "session_id": s.SessionID,
			"reason": b.Reason, "priority": priority, "agents": agentsInvolved, "trigger": OperatorHandoff, "by": b.By}}
	}
}

// toAgent is an operator's handoff to an agent, checked against the
// session's current agent as the decider checks a model's.
func (g *Ingress) toAgent(ctx context.Context, tenant string, sess store.Session, b SessionHandoffRequest) (
	func(*store.Session) error, sessionAudit, error) {
	if err := sessionOpen(&sess); err != nil {
		return nil, nil, err
	}
	if sess.AgentID == "" {
		return nil, nil, &sessionRefused{code: CodeHandoffRefused, msg: "the session has no current agent to hand off from"}
	}
	cur, err := handlers.LoadAgent(ctx, g.store, tenant, sess.AgentID)
	var unloaded *agents.Error
	if errors.As(err, &unloaded) {
		return nil, nil, &sessionRefused{code: CodeHandoffRefused, msg: "the session's agent cannot hand off: " + unloaded.Message}
	}
	if err != nil {
		return nil, nil, err
	}
	var target *orch.AgentDef
	targetErr := ""
	t, err := handlers.LoadAgent(ctx, g.store, tenant, b.TargetAgentID)
	switch {
	case errors.As(err, &unloaded):
		targetErr = unloaded.Message
	case err != nil:
		return nil, nil, err
	default:
		target = t.RunDef()
	}
	chain := sessionChain(sess)
	if why := orch.HandoffRefusal(cur.RunDef(), chain, b.TargetAgentID, target, targetErr); why != "" {
		return nil, nil, &sessionRefused{code: CodeHandoffRefused, msg: why}
	}
	at := g.now()
	change := func(s *store.Session) error {
		if err := sessionOpen(s); err != nil {
			return err
		}
		if s.AgentID != sess.AgentID {
			return &sessionRefused{code: CodeHandoffRefused, msg: "the session's agent changed meanwhile; retry"}
		}
		s.ParentAgentID, s.AgentID = s.AgentID, b.TargetAgentID
		s.HandoffChain = append(slices.Clone(chain), b.TargetAgentID)
		s.HandoffDepth, s.HandoffReason, s.LastActive = len(s.HandoffChain)-1, b.Reason, at
		return nil
	}
	return change, func(s store.Session) orch.Audit {
		return orch.Audit{Name: "handoff.accepted", Payload: map[string]any{"session_id": s.SessionID,
			"from_agent_id": s.ParentAgentID, "to_agent_id": s.AgentID, "reason": b.Reason, "depth": s.HandoffDepth,
			"chain": s.HandoffChain, "by": b.By, "trigger": OperatorHandoff}}
	}, nil
}

// sessionChain is the session's agents in handoff order: its chain, or
// its current agent alone.
func sessionChain(s store.Session) []string {
	switch {
	case len(s.HandoffChain) > 0:
		return slices.Clone(s.HandoffChain)
	case s.AgentID != "":
		return []string{s.AgentID}
	}
	return nil
}

// sessionSummary is the session's conversation as a human taking it over
// reads it.
func sessionSummary(s store.Session) string {
	var b strings.Builder
	for _, m := range s.Messages {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, runctl.Clip(m.Content, 300))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// replyDirect answers a session an operator handed to a human (no run
// waits on it): the reply joins the session's history as the assistant's
// message and the session is active again (completed with end_session).
// The first reply wins; a later one is 409 session_not_handed_off.
func (g *Ingress) replyDirect(w http.ResponseWriter, r *http.Request, tenant, id, by string, body SessionReply) {
	at := g.now()
	msgID := "reply." + uuid.NewString()
	sess, rev, err := g.cfg.Sessions.Update(r.Context(), tenant, id, func(s *store.Session) error {
		if s.State != orch.SessionHandedOff || s.Handoff == nil || s.Handoff.GateID != "" {
			return &sessionRefused{code: "session_not_handed_off", msg: "the session is " + s.State + ", not handed off to a human"}
		}
		s.Messages = append(s.Messages, store.SessionMessage{MsgID: msgID, Role: runctl.RoleAssistant,
			Content: runctl.Clip(body.Message, runctl.HistoryMessageBytes), TS: at})
		runctl.Condense(s)
		s.State, s.Handoff, s.LastActive = orch.SessionActive, nil, at
		if body.EndSession {
			s.State, s.EndedAt = orch.SessionCompleted, at
		}
		return nil
	})
	var refused *sessionRefused
	switch {
	case errors.As(err, &refused):
		refused.write(w)
		return
	case g.storeError(w, err, "session"):
		return
	}
	g.publishSession(r.Context(), sess, rev, by)
	g.log.Info().Str("session_id", id).Str("by", by).Msg("human replied to an operator handoff")
	WriteJSON(w, http.StatusOK, SessionReplied{SessionID: id, Status: sess.State, By: by})
}

// sessionAudit is the audit event of an operator's change, made from the
// session as written.
type sessionAudit func(store.Session) orch.Audit

// publishSession records an operator's change to a session: its audit
// events, then session.updated, which the projector indexes into
// agent_sessions. The sessions bucket already holds the change, so a
// failed publish is logged (the projection catches up with the session's
// next update), not answered as a failure the caller would retry.
func (g *Ingress) publishSession(ctx context.Context, sess store.Session, rev uint64, by string, audits ...sessionAudit) {
	action := uuid.NewString()
	up := runctl.SessionUpdated{Revision: rev, Session: sess, UserID: cmp.Or(sess.UserID, by), Operator: by, Action: action}
	all := make([]orch.Audit, 0, len(audits)+1)
	for _, a := range audits {
		all = append(all, a(sess))
	}
	for i, a := range append(all, orch.Audit{Name: runctl.AuditSessionUpdated, Payload: up}) {
		id := events.DeriveID(action, fmt.Sprintf("%d/%s", i, a.Name))
		if err := g.publishAudit(ctx, sess, up.UserID, id, a); err != nil {
			g.log.Error().Err(err).Str("session_id", sess.SessionID).Str("event", a.Name).Msg("publish a session's audit event")
		}
	}
}

// publishAudit publishes one audit event of a session, a trail of its
// own on the AGENT stream.
func (g *Ingress) publishAudit(ctx context.Context, sess store.Session, userID, id string, a orch.Audit) error {
	data, err := json.Marshal(a.Payload)
	if err != nil {
		return err
	}
	meta := events.Meta{Tenant: sess.TenantID, Session: sess.SessionID, SourceProcess: "ingress"}
	ev, err := events.New(id, events.AuditType(a.Name), meta, events.Audit{UserID: userID, Payload: data})
	if err != nil {
		return err
	}
	return events.Publish(ctx, g.js, ev)
}
