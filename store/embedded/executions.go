package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/store"
)

// executionKey is the KV key of a record: "<tenant>.<execution id>",
// each token escaped.
func executionKey(tenantID, id string) string { return escape(tenantID) + "." + escape(id) }

// ExecutionTTL is how long the store keeps execution records.
func (s *Store) ExecutionTTL() time.Duration { return s.executionTTL }

// PutExecution validates e and writes it, replacing the record of the
// same run. The bucket's TTL removes it ExecutionTTL after the write.
func (s *Store) PutExecution(ctx context.Context, e store.Execution) error {
	data, err := store.Encode(store.IndexExecutions, e)
	if err != nil {
		return err
	}
	if _, err := s.executions.Put(ctx, executionKey(e.TenantID, e.ExecutionID), data); err != nil {
		return fmt.Errorf("embedded: put execution %q: %w", e.ExecutionID, err)
	}
	return nil
}

// live reports whether a record is younger than the TTL: the bucket
// removes older ones, but a record written with an old created_at is
// never returned past it either.
func (s *Store) live(e store.Execution) bool {
	return !e.CreatedAt.Before(time.Now().Add(-s.executionTTL))
}

// GetExecution returns the tenant's record of execution id, or
// store.ErrNotFound (also once it is past the TTL).
func (s *Store) GetExecution(ctx context.Context, tenantID, id string) (store.Execution, error) {
	if tenantID == "" || id == "" {
		return store.Execution{}, fmt.Errorf("embedded: execution needs a tenant and an id: %w", store.ErrInvalidArgument)
	}
	ent, err := getEntry(ctx, s.executions, executionKey(tenantID, id), fmt.Sprintf("execution %q", id))
	if err != nil {
		return store.Execution{}, err
	}
	var e store.Execution
	if err := json.Unmarshal(ent.Value(), &e); err != nil {
		return store.Execution{}, fmt.Errorf("embedded: decode %s: %w", ent.Key(), err)
	}
	if !s.live(e) {
		return store.Execution{}, fmt.Errorf("embedded: execution %q: %w", id, store.ErrNotFound)
	}
	return e, nil
}

// ListExecutions returns the tenant's records q selects, newest first,
// as store.ExecutionQuery specifies.
func (s *Store) ListExecutions(ctx context.Context, q store.ExecutionQuery) ([]store.Execution, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("embedded: executions need a tenant: %w", store.ErrInvalidArgument)
	}
	out, err := list(ctx, s.executions, escape(q.TenantID)+".*", "executions", func(e store.Execution) bool { return q.Match(e) && s.live(e) })
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, store.CompareExecutionsNewestFirst)
	return out[:min(len(out), q.EffectiveLimit())], nil
}
