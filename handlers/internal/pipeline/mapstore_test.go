package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/embedded"
)

// mapStore is a second storage backend, plain maps behind a mutex, for
// TestBoundaries_StorageAdapterSwapNeedsNoHandlerChange: the same handler
// code runs a whole run on it and on the embedded store. It validates
// documents with the same local JSON Schemas every backend applies first
// and runs the store contract suite (TestMapStoreContract), so what the
// swap proves holds for a backend that keeps the contract.
type mapStore struct {
	mu     sync.Mutex
	rev    int64
	memory map[string]store.Memory
	plans  map[string]mapPlan
	events []store.Event
	seen   map[string]bool
	souls  map[[2]string]store.Soul
	sess   map[[2]string]store.Session
	defs   map[[3]string]store.Definition
	execs  map[[2]string]store.Execution
}

type mapPlan struct {
	version int64
	doc     []byte
}

func (p mapPlan) decode() (store.Plan, error) {
	var plan store.Plan
	if err := json.Unmarshal(p.doc, &plan); err != nil {
		return store.Plan{}, fmt.Errorf("mapstore: decode plan: %w", err)
	}
	return plan, nil
}

func newMapStore() *mapStore {
	return &mapStore{memory: map[string]store.Memory{}, plans: map[string]mapPlan{}, seen: map[string]bool{},
		souls: map[[2]string]store.Soul{}, sess: map[[2]string]store.Session{}}
}

// The handlers compile against both backends through the interfaces only.
var (
	_ memory.MemoryStore        = (*mapStore)(nil)
	_ projector.PlanStore       = (*mapStore)(nil)
	_ projector.ProjectionStore = (*mapStore)(nil)
	_ router.RouterStore        = (*mapStore)(nil)
	_ ingress.IngressStore      = (*mapStore)(nil)

	_ memory.MemoryStore        = (*embedded.Store)(nil)
	_ projector.PlanStore       = (*embedded.Store)(nil)
	_ projector.ProjectionStore = (*embedded.Store)(nil)
	_ router.RouterStore        = (*embedded.Store)(nil)
	_ ingress.IngressStore      = (*embedded.Store)(nil)
)

func (s *mapStore) PutMemory(_ context.Context, m store.Memory) (store.Memory, error) {
	if err := store.Validate(store.IndexMemory, m); err != nil {
		return store.Memory{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !m.Version.IsZero() {
		if cur, ok := s.memory[m.Key]; !ok || cur.Version.SeqNo != m.Version.SeqNo {
			return store.Memory{}, fmt.Errorf("mapstore: memory %q: %w", m.Key, store.ErrConflict)
		}
	}
	s.rev++
	m.Version = store.Version{SeqNo: s.rev, PrimaryTerm: 1}
	s.memory[m.Key] = m
	return m, nil
}

func (s *mapStore) GetMemory(_ context.Context, key string) (store.Memory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.memory[key]
	if !ok {
		return store.Memory{}, fmt.Errorf("mapstore: memory %q: %w", key, store.ErrNotFound)
	}
	return m, nil
}

func (s *mapStore) PutPlan(_ context.Context, p store.Plan, version int64) error {
	if err := store.Validate(store.IndexPlans, p); err != nil {
		return err
	}
	doc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.plans[p.PlanID]; ok {
		if version < cur.version || version == cur.version && !bytes.Equal(doc, cur.doc) {
			return fmt.Errorf("mapstore: plan %q version %d, stored %d: %w", p.PlanID, version, cur.version, store.ErrStale)
		}
	}
	s.plans[p.PlanID] = mapPlan{version: version, doc: doc}
	return nil
}

func (s *mapStore) GetPlan(_ context.Context, tenantID, planID string) (store.Plan, int64, error) {
	if tenantID == "" || planID == "" {
		return store.Plan{}, 0, fmt.Errorf("mapstore: plan needs a tenant and an id: %w", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	cur, ok := s.plans[planID]
	s.mu.Unlock()
	if !ok {
		return store.Plan{}, 0, fmt.Errorf("mapstore: plan %q: %w", planID, store.ErrNotFound)
	}
	p, err := cur.decode()
	if err != nil {
		return store.Plan{}, 0, err
	}
	if p.TenantID != tenantID {
		return store.Plan{}, 0, fmt.Errorf("mapstore: plan %q: %w", planID, store.ErrNotFound)
	}
	return p, cur.version, nil
}

func (s *mapStore) AppendEvents(_ context.Context, evs []store.Event) error {
	for _, ev := range evs {
		if err := store.Validate(store.IndexEvents, ev); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		if !s.seen[ev.EventID] {
			s.seen[ev.EventID] = true
			s.events = append(s.events, ev)
		}
	}
	return nil
}

func (s *mapStore) Trace(_ context.Context, q store.TraceQuery) ([]store.Event, error) {
	if q.TenantID == "" || q.SessionID == "" && q.PlanID == "" {
		return nil, fmt.Errorf("mapstore: trace needs a tenant and a session or plan: %w", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Event
	for _, ev := range s.events {
		if ev.TenantID == q.TenantID && (q.SessionID == "" || ev.SessionID == q.SessionID) && (q.PlanID == "" || ev.PlanID == q.PlanID) {
			out = append(out, ev)
		}
	}
	slices.SortStableFunc(out, func(a, b store.Event) int { return a.TS.Compare(b.TS) })
	return out, nil
}

func (s *mapStore) Events(_ context.Context, q store.EventQuery) ([]store.Event, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("mapstore: events without tenant: %w", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return newestFirst(slices.Values(s.events), q.Match, store.CompareNewestFirst, q.EffectiveLimit()), nil
}

func (s *mapStore) PutSoul(_ context.Context, soul store.Soul) error {
	if err := store.Validate(store.IndexSouls, soul); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.souls[[2]string{soul.TenantID, soul.UserID}] = soul
	return nil
}

func (s *mapStore) GetSoul(_ context.Context, tenantID, userID string) (store.Soul, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	soul, ok := s.souls[[2]string{tenantID, userID}]
	if !ok {
		return store.Soul{}, fmt.Errorf("mapstore: soul %q/%q: %w", tenantID, userID, store.ErrNotFound)
	}
	return soul, nil
}

func (s *mapStore) SoulFor(ctx context.Context, tenantID, userID string) (store.Soul, error) {
	soul, err := s.GetSoul(ctx, tenantID, userID)
	if errors.Is(err, store.ErrNotFound) && userID != "" {
		return s.GetSoul(ctx, tenantID, "")
	}
	return soul, err
}

func (s *mapStore) PutSession(_ context.Context, sess store.Session) error {
	if err := store.Validate(store.IndexSessions, sess); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess[[2]string{sess.TenantID, sess.SessionID}] = sess
	return nil
}

// QueryMemory ranks the memories q matches by cosine similarity.
func (s *mapStore) QueryMemory(_ context.Context, q store.MemoryQuery) ([]store.MemoryHit, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("mapstore: memory query without tenant: %w", store.ErrInvalidArgument)
	}
	if err := q.CheckWithin(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var hits []store.MemoryHit
	at := q.Time()
	for _, m := range s.memory {
		if q.Match(m, at) && len(m.Embedding) == len(q.Vector) {
			hits = append(hits, store.MemoryHit{Memory: m, Score: store.Cosine(q.Vector, m.Embedding)})
		}
	}
	slices.SortFunc(hits, store.CompareHits)
	return hits[:min(len(hits), cmp.Or(q.TopK, store.DefaultTopK))], nil
}

// PruneMemory deletes the memories expired at before.
func (s *mapStore) PruneMemory(_ context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, m := range s.memory {
		if m.Expired(before) {
			delete(s.memory, k)
			n++
		}
	}
	return n, nil
}

// ListSessions lists the tenant's sessions q selects, newest first.
func (s *mapStore) ListSessions(_ context.Context, q store.SessionQuery) ([]store.Session, error) {
	if q.TenantID == "" {
		return nil, store.ErrInvalidArgument
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return newestFirst(maps.Values(s.sess), q.Match, store.CompareSessionsNewestFirst, q.EffectiveLimit()), nil
}

// newestFirst is what of all match selects, ordered by compare (stably:
// the events' append order breaks their ties), the first limit of it.
func newestFirst[T any](all iter.Seq[T], match func(T) bool, compare func(a, b T) int, limit int) []T {
	var out []T
	for v := range all {
		if match(v) {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, compare)
	return out[:min(len(out), limit)]
}
