package runctl

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Asking marks the session of a run parked at a clarify gate as waiting
// for the answer to its question: the session's next message is the
// answer (the router takes it so). It creates the session if no run of it
// has ended yet, and returns the event that records it; marking it again
// (a redelivered hop) writes nothing.
func (s *Sessions) Asking(ctx context.Context, req orch.RunRequest, gate orch.Gate, at time.Time) (SessionUpdated, error) {
	e, err := kvcas.Update(ctx, s.KV, SessionKey(req.TenantID, req.SessionID), func(sess *store.Session, rev uint64) (bool, error) {
		if rev == 0 {
			*sess = store.Session{SessionID: req.SessionID, TenantID: req.TenantID, UserID: req.UserID,
				State: orch.SessionActive, StartedAt: at}
		}
		if q := sess.Clarify; q != nil && q.GateID == gate.ID {
			return false, nil
		}
		sess.Clarify = &store.SessionClarify{RunID: req.RunID, GateID: gate.ID, Question: gate.Question.Text, At: at}
		sess.LastActive = at
		return true, nil
	})
	if err != nil {
		return SessionUpdated{}, fmt.Errorf("handlers: session: %w", err)
	}
	return SessionUpdated{RunID: req.RunID, UserID: req.UserID, Message: req.Message, Asking: true, Revision: e.Revision,
		Session: e.Value}, nil
}

// Answered clears the question of gate from its session, once the gate is
// resolved (answered, declined, expired): the session's next message is a
// run of its own again. A session that waits for another question keeps
// it.
func (s *Sessions) Answered(ctx context.Context, tenantID, sessionID, gateID string) error {
	if orch.ValidateID("tenant_id", tenantID) != nil || orch.ValidateID("session_id", sessionID) != nil {
		return nil
	}
	_, err := kvcas.Update(ctx, s.KV, SessionKey(tenantID, sessionID), func(sess *store.Session, rev uint64) (bool, error) {
		if rev == 0 || sess.Clarify == nil || sess.Clarify.GateID != gateID {
			return false, nil
		}
		sess.Clarify = nil
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("handlers: session: %w", err)
	}
	return nil
}

// Withdraw takes req's run out of its session's queue, and its kept
// request with it: its message answered the question of the session's
// run in flight, so it starts no run of its own.
func (s *SessionRuns) Withdraw(ctx context.Context, req orch.RunRequest) error {
	if s == nil || s.KV == nil {
		return nil
	}
	_, err := kvcas.Update(ctx, s.KV, sessionRunsKey(req.TenantID, req.SessionID), func(e *sessionRunsEntry, _ uint64) (bool, error) {
		n := len(e.Queue)
		e.Queue = slicesWithout(e.Queue, req.RunID)
		return len(e.Queue) != n, nil
	})
	if err != nil {
		return fmt.Errorf("handlers: withdraw run %s: %w", req.RunID, err)
	}
	_ = s.KV.Purge(ctx, queuedRunKey(req))
	return nil
}

// slicesWithout returns a copy of list without v.
func slicesWithout(list []string, v string) []string {
	out := make([]string, 0, len(list))
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}
