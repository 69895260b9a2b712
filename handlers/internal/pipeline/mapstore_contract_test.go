package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/storetest"
)

// mapStore is a storage backend like the shipped ones: it runs their
// contract suite.
var _ storetest.Backend = (*mapStore)(nil)

func TestMapStoreContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) storetest.Backend { return newMapStore() })
}

// CreateMemory writes m only if its key is absent.
func (s *mapStore) CreateMemory(ctx context.Context, m store.Memory) (store.Memory, error) {
	if err := store.Validate(store.IndexMemory, m); err != nil {
		return store.Memory{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.memory[m.Key]; ok {
		return store.Memory{}, fmt.Errorf("mapstore: memory %q exists: %w", m.Key, store.ErrConflict)
	}
	s.rev++
	m.Version = store.Version{SeqNo: s.rev, PrimaryTerm: 1}
	s.memory[m.Key] = m
	return m, nil
}

// GetSession returns the tenant's session.
func (s *mapStore) GetSession(_ context.Context, tenantID, sessionID string) (store.Session, error) {
	if tenantID == "" || sessionID == "" {
		return store.Session{}, fmt.Errorf("mapstore: session needs a tenant and an id: %w", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sess[[2]string{tenantID, sessionID}]
	if !ok {
		return store.Session{}, fmt.Errorf("mapstore: session %q: %w", sessionID, store.ErrNotFound)
	}
	return sess, nil
}

// Health aggregates the tenant's plans.
func (s *mapStore) Health(_ context.Context, tenantID string) (store.PlanHealth, error) {
	if tenantID == "" {
		return store.PlanHealth{}, fmt.Errorf("mapstore: health without tenant: %w", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var plans []store.Plan
	for _, cur := range s.plans {
		p, err := cur.decode()
		if err != nil {
			return store.PlanHealth{}, err
		}
		if p.TenantID == tenantID {
			plans = append(plans, p)
		}
	}
	return store.ComputePlanHealth(plans), nil
}

// Close releases nothing: the maps go with the store.
func (s *mapStore) Close() error { return nil }
