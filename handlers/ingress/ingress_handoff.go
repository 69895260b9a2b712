package ingress

import (
	"cmp"
	"errors"
	"net/http"
	"strings"

	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// SessionReply is the body of POST /agent/sessions/{session_id}/reply: a
// human's answer to a session handed off to a human. By is who replies
// (the credential's user when it names one); EndSession completes the
// session with the reply instead of handing it back to its agent.
type SessionReply struct {
	Message    string `json:"message"`
	By         string `json:"by,omitempty"`
	EndSession bool   `json:"end_session,omitempty"`
}

// SessionReplied is the answer of POST /agent/sessions/{session_id}/reply.
type SessionReplied struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id,omitempty"`
	GateID    string `json:"gate_id,omitempty"`
	Status    string `json:"status"`
	By        string `json:"by"`
}

// maxReplyBytes bounds a human's reply, as a run's message is bounded.
const maxReplyBytes = 32 << 10

// reply serves POST /agent/sessions/{session_id}/reply. The session must
// be the caller's tenant's (else 404) and handed off (else 409
// session_not_handed_off). The reply resolves the human gate of the run
// waiting for it, as an approval does (first decision wins), and
// resumes that run: it finishes with the reply as its answer, appended to
// the session, which is active again (completed with end_session). 202.
// A session an operator handed off (POST .../handoff; no run waits) takes
// the reply into its history at once and is active again: 200.
func (g *Ingress) reply(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Gates == nil {
		WriteError(w, http.StatusServiceUnavailable, "sessions_unavailable", "this ingress keeps no gates")
		return
	}
	tenant, sess, ok := g.callerSession(w, r)
	if !ok {
		return
	}
	id, c := sess.SessionID, callerOf(r.Context())
	var body SessionReply
	if !g.decodeBody(w, r, &body) {
		return
	}
	by := cmp.Or(c.UserID, body.By, r.Header.Get("X-User-Id"))
	switch {
	case strings.TrimSpace(body.Message) == "":
		WriteError(w, http.StatusBadRequest, "invalid_request", "message is required")
		return
	case len(body.Message) > maxReplyBytes:
		WriteError(w, http.StatusBadRequest, "invalid_request", "message is longer than 32 KiB")
		return
	case by == "" || len(by) > 128:
		WriteError(w, http.StatusBadRequest, "invalid_request", "by (who replies) is required, at most 128 characters")
		return
	}
	h := sess.Handoff
	if sess.State != orch.SessionHandedOff || h == nil {
		WriteError(w, http.StatusConflict, "session_not_handed_off", "the session is "+sess.State+", not handed off to a human")
		return
	}
	if h.GateID == "" {
		// An operator's handoff: no run waits, the reply resumes the
		// session itself.
		g.replyDirect(w, r, tenant, id, by, body)
		return
	}
	a := orch.ApprovalDecided{RunID: h.RunID, TenantID: tenant, SessionID: id, Gate: h.GateID, Decision: orch.GateApproved,
		By: by, Comment: body.Message, EndSession: body.EndSession, At: g.now()}
	rec, _, err := g.cfg.Gates.Resolve(r.Context(), tenant, a)
	switch {
	case errors.Is(err, runctl.ErrGateDecided), errors.Is(err, runctl.ErrGateNotFound):
		WriteError(w, http.StatusConflict, "session_not_handed_off", "the handoff is no longer open: "+rec.Status)
		return
	case err != nil:
		g.log.Error().Err(err).Str("session_id", id).Msg("resolve human gate")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the reply could not be recorded; retry")
		return
	}
	if rec.Applied == "" {
		t := runTarget{tenant: tenant, runID: h.RunID, by: by, plan: store.Plan{PlanID: orch.PlanID(h.RunID), SessionID: id}}
		if err := g.sendDecision(r.Context(), t, rec); err != nil {
			g.log.Error().Err(err).Str("session_id", id).Msg("publish approval.decided for a reply")
			WriteError(w, http.StatusServiceUnavailable, "unavailable", "the reply is recorded but could not be sent; retry")
			return
		}
	}
	g.log.Info().Str("session_id", id).Str("run_id", h.RunID).Str("by", rec.By).Msg("human replied to a handoff")
	WriteJSON(w, http.StatusAccepted, SessionReplied{SessionID: id, RunID: h.RunID, GateID: h.GateID, Status: "resuming", By: rec.By})
}
