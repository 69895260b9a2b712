package orch

import (
	"cmp"
	"fmt"
	"slices"
)

// Sessions across runs (seed 002 "Message Processing Flow" step 6: an
// existing session is loaded and continues with its current agent). The
// router loads the run's session and passes what it says of who answers
// in Requested.Session; the decider takes it here, purely.

// SessionState is what a new run's session says of who may answer it:
// its status and, once an agent answered in it, its current agent, the
// handoff chain that led there (the original agent first, the current
// last; empty before a handoff) and the last handoff's reason.
type SessionState struct {
	Status  string   `json:"status"`
	AgentID string   `json:"agent_id,omitempty"`
	Chain   []string `json:"handoff_chain,omitempty"`
	Reason  string   `json:"handoff_reason,omitempty"`
	// Stage and Skills are where the session's agent was left: its
	// Handoffs-pattern stage and the skills it loaded.
	Stage  string   `json:"stage,omitempty"`
	Skills []string `json:"loaded_skills,omitempty"`
}

// Why a new run cannot go on in its session: the stable codes the
// ingress answers with (409) and the decider puts in detail.code of a
// run that arrived anyway.
const (
	// SessionRefusedHandedOff: the session is a human's until the reply
	// (POST /agent/sessions/{session_id}/reply); the run ends
	// REVIEW_REQUIRED.
	SessionRefusedHandedOff = "session_handed_off"
	// SessionRefusedCompleted: the session has ended (max_turns with
	// handoff_behavior end, or a human's reply with end_session); a new
	// conversation takes a new session. The run ends VALIDATION_FAIL.
	SessionRefusedCompleted = "session_completed"
	// SessionRefusedAgent: the run names an agent that is neither the
	// session's original nor its current one; switching agents is a
	// handoff (POST /agent/sessions/{session_id}/handoff). The run ends
	// VALIDATION_FAIL.
	SessionRefusedAgent = "session_agent_mismatch"
)

// SessionRefusal says why a run cannot go on in its session.
type SessionRefusal struct {
	Code    string
	Message string
}

// TerminalCode is the terminal code of a run refused for r.
func (r SessionRefusal) TerminalCode() string {
	if r.Code == SessionRefusedHandedOff {
		return CodeReviewRequired
	}
	return CodeValidationFail
}

// SessionAgent returns the agent a new run of req acts as in its session
// s (nil: a new session): the session's current agent when it has one and
// the run names none, the session's original agent or the current one;
// otherwise the agent the run names. A handed-off or completed session,
// or a run naming another agent than the session's, is refused.
func SessionAgent(req RunRequest, s *SessionState) (string, *SessionRefusal) {
	if s == nil {
		return req.AgentID, nil
	}
	switch s.Status {
	case SessionHandedOff:
		return "", &SessionRefusal{Code: SessionRefusedHandedOff,
			Message: fmt.Sprintf("session %s is handed off to a human until a reply", req.SessionID)}
	case SessionCompleted:
		return "", &SessionRefusal{Code: SessionRefusedCompleted,
			Message: fmt.Sprintf("session %s is completed; start a new session", req.SessionID)}
	}
	if s.AgentID == "" || req.AgentID == "" || req.AgentID == s.AgentID || len(s.Chain) > 0 && req.AgentID == s.Chain[0] {
		return cmp.Or(s.AgentID, req.AgentID), nil
	}
	return "", &SessionRefusal{Code: SessionRefusedAgent, Message: fmt.Sprintf(
		"session %s continues with agent %s, not %s; hand the session off to change its agent", req.SessionID, s.AgentID, req.AgentID)}
}

// ChainRecords are the handoff records of a session's chain (original
// agent first), as a run continuing it carries them: depth and cycle
// checks then count the handoffs of earlier runs. Only the last reason
// is known.
func ChainRecords(chain []string, reason string) []HandoffRecord {
	var out []HandoffRecord
	for i := 1; i < len(chain); i++ {
		r := HandoffRecord{From: chain[i-1], To: chain[i], Depth: i}
		if i == len(chain)-1 {
			r.Reason = reason
		}
		out = append(out, r)
	}
	return out
}

// HandoffRefusal says why an agent handoff from current (with the chain
// chain, original first) to target cannot be taken, or "": the target
// must be one of current's sub_agents, within MaxHandoffDepth and not
// already in the chain, and loaded (targetErr says why it could not be).
// The decider applies it to a model's handoff_to_agent, the ingress to an
// operator's handoff.
func HandoffRefusal(current *AgentDef, chain []string, targetID string, target *AgentDef, targetErr string) string {
	depth := max(len(chain)-1, 0) + 1
	switch {
	case current == nil:
		return "the session acts as no agent"
	case !slices.Contains(current.SubAgents, targetID):
		return fmt.Sprintf("agent %s does not name %q in its sub_agents", current.ID, targetID)
	case depth > MaxHandoffDepth:
		return fmt.Sprintf("the handoff would reach depth %d; the limit is %d", depth, MaxHandoffDepth)
	case slices.Contains(chain, targetID) || targetID == current.ID:
		return fmt.Sprintf("agent %s is already in the handoff chain %v", targetID, chain)
	case targetErr != "":
		return targetErr
	case target == nil || target.ID != targetID:
		return fmt.Sprintf("agent %q was not loaded", targetID)
	}
	return ""
}

// continueSession makes a run continuing its session act as the
// session's agent with its chain, or ends a run its session refuses.
// It reports whether the run goes on.
func (d *decision) continueSession(in Requested) bool {
	_, refused := SessionAgent(in.Request, in.Session)
	if refused != nil {
		d.untouched = true // the run leaves the session as it is
		d.audit("session.refused", "", map[string]any{"code": refused.Code, "session_id": in.Request.SessionID,
			"status": in.Session.Status, "agent_id": in.Session.AgentID, "requested_agent_id": in.Request.AgentID})
		d.finish(refused.TerminalCode(), refused.Message, map[string]any{"code": refused.Code,
			"session_id": in.Request.SessionID, "session_status": in.Session.Status, "agent_id": in.Session.AgentID})
		return false
	}
	return true
}

// resumeChain gives a run continuing its session's handoff chain the
// session's records, after it took on the session's current agent.
func (d *decision) resumeChain(in Requested) {
	s := in.Session
	if s == nil || s.AgentID == "" || d.State.Agent == nil || d.State.Agent.ID != s.AgentID {
		return
	}
	if len(s.Chain) > 1 && s.Chain[len(s.Chain)-1] == s.AgentID {
		d.State.Handoffs = ChainRecords(s.Chain, s.Reason)
	}
	d.audit("session.continued", "", map[string]any{"session_id": in.Request.SessionID, "agent_id": s.AgentID,
		"requested_agent_id": in.Request.AgentID, "handoff_depth": len(d.State.Handoffs), "chain": d.chain()})
}
