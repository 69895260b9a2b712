package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/store"
)

// The definitions of mapStore, the handlers' minimal second backend.

func (s *mapStore) defKey(tenantID, kind, id string) [3]string { return [3]string{tenantID, kind, id} }

func (s *mapStore) PutDefinition(_ context.Context, d store.Definition, expected int64) error {
	if err := store.Validate(store.IndexDefinitions, d); err != nil {
		return err
	}
	if d.Version != expected+1 {
		return fmt.Errorf("mapstore: version %d after %d: %w", d.Version, expected, store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.defs == nil {
		s.defs = map[[3]string]store.Definition{}
	}
	k := s.defKey(d.TenantID, d.Kind, d.ID)
	cur, ok := s.defs[k]
	switch {
	case expected == 0 && ok:
		return fmt.Errorf("mapstore: %s %q exists: %w", d.Kind, d.ID, store.ErrConflict)
	case expected > 0 && !ok:
		return fmt.Errorf("mapstore: %s %q: %w", d.Kind, d.ID, store.ErrNotFound)
	case expected > 0 && cur.Version != expected:
		return fmt.Errorf("mapstore: %s %q: %w", d.Kind, d.ID, store.ErrConflict)
	}
	s.defs[k] = d
	return nil
}

func (s *mapStore) GetDefinition(_ context.Context, tenantID, kind, id string) (store.Definition, error) {
	if tenantID == "" || kind == "" || id == "" {
		return store.Definition{}, fmt.Errorf("mapstore: definition needs a tenant, a kind and an id: %w", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.defs[s.defKey(tenantID, kind, id)]
	if !ok {
		return store.Definition{}, fmt.Errorf("mapstore: %s %q: %w", kind, id, store.ErrNotFound)
	}
	return d, nil
}

func (s *mapStore) ListDefinitions(_ context.Context, tenantID, kind string) ([]store.Definition, error) {
	if tenantID == "" || kind == "" {
		return nil, fmt.Errorf("mapstore: definitions need a tenant and a kind: %w", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Definition
	for k, d := range s.defs {
		if k[0] == tenantID && k[1] == kind {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b store.Definition) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *mapStore) DeleteDefinition(_ context.Context, tenantID, kind, id string, expected int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.defKey(tenantID, kind, id)
	cur, ok := s.defs[k]
	switch {
	case !ok:
		return fmt.Errorf("mapstore: %s %q: %w", kind, id, store.ErrNotFound)
	case expected != 0 && cur.Version != expected:
		return fmt.Errorf("mapstore: %s %q: %w", kind, id, store.ErrConflict)
	}
	delete(s.defs, k)
	return nil
}
