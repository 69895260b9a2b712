package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/store"
)

// planEnvelope is the stored form of a plan: the external version next to
// the document.
type planEnvelope struct {
	Version int64           `json:"version"`
	Plan    json.RawMessage `json:"plan"`
}

// PutPlan validates p and stores it with the caller's external version
// (for example the sequence of the event it was projected from). It is
// stored only if version is greater than the stored version; otherwise it
// fails with store.ErrStale and the stored projection is kept. Re-writing
// the stored version with byte-identical content succeeds without writing
// (an idempotent redelivery); the same version with different content is
// stale. version must not be negative. Concurrent writers are serialised
// with a compare-and-set on the KV revision (kvcas.Update), so the highest
// version always wins.
func (s *Store) PutPlan(ctx context.Context, p store.Plan, version int64) error {
	if version < 0 {
		return fmt.Errorf("embedded: plan %q: negative version %d: %w", p.PlanID, version, store.ErrInvalidArgument)
	}
	doc, err := store.Encode(store.IndexPlans, p)
	if err != nil {
		return err
	}
	key := escape(p.PlanID)
	// The snapshot after one this store wrote, or a plan's first: one
	// compare-and-set, no read. If another writer came in between, the
	// compare fails and the update decides on the stored version.
	var known *kvcas.Entry[planEnvelope]
	switch w, ok := s.lastWritten(key); {
	case ok && version > w.version:
		known = &kvcas.Entry[planEnvelope]{Value: planEnvelope{Version: w.version}, Revision: w.rev}
	case !ok:
		known = &kvcas.Entry[planEnvelope]{}
	}
	e, err := kvcas.UpdateFrom(ctx, s.plans, key, known, func(cur *planEnvelope, rev uint64) (bool, error) {
		if rev != 0 {
			if version < cur.Version || version == cur.Version && !bytes.Equal(cur.Plan, doc) {
				return false, fmt.Errorf("embedded: plan %q: version %d, stored %d: %w", p.PlanID, version, cur.Version, store.ErrStale)
			}
			if version == cur.Version {
				return false, nil
			}
		}
		*cur = planEnvelope{Version: version, Plan: doc}
		return true, nil
	})
	if err != nil {
		if errors.Is(err, store.ErrStale) {
			return err
		}
		return fmt.Errorf("embedded: put plan %q: %w", p.PlanID, err)
	}
	s.wrote(key, e.Value.Version, e.Revision)
	return nil
}

// writtenPlan is a plan's version and KV revision as this store wrote it.
type writtenPlan struct {
	version int64
	rev     uint64
}

// maxWrittenPlans bounds the written cache; past it the cache starts over.
const maxWrittenPlans = 4096

func (s *Store) lastWritten(key string) (writtenPlan, bool) {
	s.writtenMu.Lock()
	defer s.writtenMu.Unlock()
	w, ok := s.written[key]
	return w, ok
}

func (s *Store) wrote(key string, version int64, rev uint64) {
	s.writtenMu.Lock()
	defer s.writtenMu.Unlock()
	if s.written == nil || len(s.written) >= maxWrittenPlans {
		s.written = map[string]writtenPlan{}
	}
	s.written[key] = writtenPlan{version: version, rev: rev}
}

// GetPlan returns the plan planID of tenantID and its external version,
// or store.ErrNotFound, also when the plan is another tenant's.
func (s *Store) GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error) {
	if tenantID == "" {
		return store.Plan{}, 0, fmt.Errorf("embedded: plan without tenant: %w", store.ErrInvalidArgument)
	}
	if planID == "" {
		return store.Plan{}, 0, fmt.Errorf("embedded: empty plan id: %w", store.ErrInvalidArgument)
	}
	e, err := getEntry(ctx, s.plans, escape(planID), fmt.Sprintf("plan %q", planID))
	if err != nil {
		return store.Plan{}, 0, err
	}
	env, err := decodeEnvelope(e)
	if err != nil {
		return store.Plan{}, 0, err
	}
	p, err := decodePlan(e, env)
	if err != nil {
		return store.Plan{}, 0, err
	}
	if p.TenantID != tenantID {
		// Another tenant's plan reads exactly as a missing one.
		return store.Plan{}, 0, fmt.Errorf("embedded: plan %q: %w", planID, store.ErrNotFound)
	}
	return p, env.Version, nil
}

// Health aggregates the plans of tenantID (see store.ComputePlanHealth). It
// scans the whole plans bucket.
func (s *Store) Health(ctx context.Context, tenantID string) (store.PlanHealth, error) {
	if tenantID == "" {
		return store.PlanHealth{}, fmt.Errorf("embedded: health without tenant: %w", store.ErrInvalidArgument)
	}
	var plans []store.Plan
	err := scan(ctx, s.plans, func(e jetstream.KeyValueEntry) error {
		env, err := decodeEnvelope(e)
		if err != nil {
			return err
		}
		p, err := decodePlan(e, env)
		if err != nil {
			return err
		}
		if p.TenantID == tenantID {
			plans = append(plans, p)
		}
		return nil
	})
	if err != nil {
		return store.PlanHealth{}, fmt.Errorf("embedded: health: %w", err)
	}
	return store.ComputePlanHealth(plans), nil
}

func decodeEnvelope(e jetstream.KeyValueEntry) (planEnvelope, error) {
	var env planEnvelope
	if err := json.Unmarshal(e.Value(), &env); err != nil {
		return planEnvelope{}, fmt.Errorf("embedded: decode plan %s: %w", e.Key(), err)
	}
	return env, nil
}

func decodePlan(e jetstream.KeyValueEntry, env planEnvelope) (store.Plan, error) {
	var p store.Plan
	if err := json.Unmarshal(env.Plan, &p); err != nil {
		return store.Plan{}, fmt.Errorf("embedded: decode plan %s: %w", e.Key(), err)
	}
	return p, nil
}
