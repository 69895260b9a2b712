package pipeline

import (
	"context"
	"maps"
	"time"

	"github.com/agentbus/agentbus/store"
)

// PutExecution validates and keeps an execution record by tenant and id.
func (s *mapStore) PutExecution(_ context.Context, e store.Execution) error {
	if err := store.Validate(store.IndexExecutions, e); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.execs == nil {
		s.execs = map[[2]string]store.Execution{}
	}
	s.execs[[2]string{e.TenantID, e.ExecutionID}] = e
	return nil
}

// GetExecution returns the tenant's record of id.
func (s *mapStore) GetExecution(_ context.Context, tenantID, id string) (store.Execution, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[[2]string{tenantID, id}]
	if !ok || !live(e) {
		return store.Execution{}, store.ErrNotFound
	}
	return e, nil
}

// ListExecutions returns the tenant's records q selects, newest first.
func (s *mapStore) ListExecutions(_ context.Context, q store.ExecutionQuery) ([]store.Execution, error) {
	if q.TenantID == "" {
		return nil, store.ErrInvalidArgument
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	match := func(e store.Execution) bool { return q.Match(e) && live(e) }
	return newestFirst(maps.Values(s.execs), match, store.CompareExecutionsNewestFirst, q.EffectiveLimit()), nil
}

// live reports whether an execution record is younger than the TTL the
// shipped backends keep records for by default.
func live(e store.Execution) bool {
	return !e.CreatedAt.Before(time.Now().Add(-store.DefaultExecutionTTL))
}
