package runctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
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
	key := SessionKey(tenantID, sessionID)
	for {
		sess, rev, err := s.Get(ctx, tenantID, sessionID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			sess = store.Session{SessionID: sessionID, TenantID: tenantID, StartedAt: at}
		case err != nil:
			return err
		}
		if sess.State == orch.SessionCompleted {
			return nil
		}
		sess.State, sess.LastActive, sess.EndedAt, sess.EndedBy = orch.SessionCompleted, at, at, runID
		data, err := json.Marshal(sess)
		if err != nil {
			return fmt.Errorf("handlers: encode session: %w", err)
		}
		if rev == 0 {
			_, err = s.KV.Create(ctx, key, data)
		} else {
			_, err = s.KV.Update(ctx, key, data, rev)
		}
		if kvs.IsConflict(err) {
			continue // a run of the session appended first
		}
		if err != nil {
			return fmt.Errorf("handlers: write session: %w", err)
		}
		return nil
	}
}
