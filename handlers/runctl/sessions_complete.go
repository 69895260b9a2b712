package runctl

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Complete marks a tenant's session completed (the end_conversation
// tool), creating it if no run of it has ended yet; its exchanges are
// kept, and a later Append keeps the state.
func (s *Sessions) Complete(ctx context.Context, tenantID, sessionID, runID string, at time.Time) error {
	if orch.ValidateID("tenant_id", tenantID) != nil || orch.ValidateID("session_id", sessionID) != nil {
		return store.ErrNotFound
	}
	_, err := kvcas.Update(ctx, s.KV, SessionKey(tenantID, sessionID), func(sess *store.Session, rev uint64) (bool, error) {
		if rev == 0 {
			*sess = store.Session{SessionID: sessionID, TenantID: tenantID, StartedAt: at}
		}
		if sess.State == orch.SessionCompleted {
			return false, nil
		}
		sess.State, sess.LastActive, sess.EndedAt, sess.EndedBy = orch.SessionCompleted, at, at, runID
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("handlers: complete session: %w", err)
	}
	return nil
}
