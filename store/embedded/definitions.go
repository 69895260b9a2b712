package embedded

import (
	"context"
	"fmt"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/store"
)

// definitionKey is the KV key of a definition: "<tenant>.<kind>.<id>",
// each token escaped.
func definitionKey(tenantID, kind, id string) string {
	return escape(tenantID) + "." + escape(kind) + "." + escape(id)
}

// PutDefinition validates d and writes it. With expected 0 it creates d,
// which must have version 1, and fails with store.ErrConflict if the
// definition exists. Otherwise it replaces the stored definition only if
// its version is expected and d.Version is expected+1: store.ErrNotFound
// if there is none, store.ErrConflict if its version differs or another
// write won the race (the write is conditional on the KV revision read).
func (s *Store) PutDefinition(ctx context.Context, d store.Definition, expected int64) error {
	data, err := store.Encode(store.IndexDefinitions, d)
	if err != nil {
		return err
	}
	if d.Version != expected+1 || expected < 0 {
		return fmt.Errorf("embedded: definition %q: version %d after %d: %w", d.ID, d.Version, expected, store.ErrInvalidArgument)
	}
	key := definitionKey(d.TenantID, d.Kind, d.ID)
	if expected == 0 {
		_, err := s.definitions.Create(ctx, key, data)
		if kvcas.IsConflict(err) {
			return fmt.Errorf("embedded: %s %q exists: %w", d.Kind, d.ID, store.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("embedded: create %s %q: %w", d.Kind, d.ID, err)
		}
		return nil
	}
	cur, rev, err := s.getDefinition(ctx, d.TenantID, d.Kind, d.ID)
	if err != nil {
		return err
	}
	if cur.Version != expected {
		return fmt.Errorf("embedded: %s %q: stored version %d, expected %d: %w", d.Kind, d.ID, cur.Version, expected, store.ErrConflict)
	}
	if _, err := s.definitions.Update(ctx, key, data, rev); kvcas.IsConflict(err) {
		return fmt.Errorf("embedded: %s %q: %w", d.Kind, d.ID, store.ErrConflict)
	} else if err != nil {
		return fmt.Errorf("embedded: update %s %q: %w", d.Kind, d.ID, err)
	}
	return nil
}

// GetDefinition returns the definition (tenantID, kind, id), or
// store.ErrNotFound.
func (s *Store) GetDefinition(ctx context.Context, tenantID, kind, id string) (store.Definition, error) {
	d, _, err := s.getDefinition(ctx, tenantID, kind, id)
	return d, err
}

func (s *Store) getDefinition(ctx context.Context, tenantID, kind, id string) (store.Definition, uint64, error) {
	if tenantID == "" || kind == "" || id == "" {
		return store.Definition{}, 0, fmt.Errorf("embedded: definition needs a tenant, a kind and an id: %w", store.ErrInvalidArgument)
	}
	e, err := getEntry(ctx, s.definitions, definitionKey(tenantID, kind, id), fmt.Sprintf("%s %q", kind, id))
	if err != nil {
		return store.Definition{}, 0, err
	}
	var d store.Definition
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return store.Definition{}, 0, fmt.Errorf("embedded: decode %s: %w", e.Key(), err)
	}
	return d, e.Revision(), nil
}

// ListDefinitions returns the tenant's definitions of kind ordered by id,
// at most store.MaxListDefinitions of them.
func (s *Store) ListDefinitions(ctx context.Context, tenantID, kind string) ([]store.Definition, error) {
	if tenantID == "" || kind == "" {
		return nil, fmt.Errorf("embedded: definitions need a tenant and a kind: %w", store.ErrInvalidArgument)
	}
	out, err := list[store.Definition](ctx, s.definitions, escape(tenantID)+"."+escape(kind)+".*", kind, nil)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.Definition) int { return strings.Compare(a.ID, b.ID) })
	return out[:min(len(out), store.MaxListDefinitions)], nil
}

// DeleteDefinition deletes the definition (tenantID, kind, id): with
// expected 0 whatever its version, otherwise only if its version is
// expected (else store.ErrConflict). A missing definition is
// store.ErrNotFound.
func (s *Store) DeleteDefinition(ctx context.Context, tenantID, kind, id string, expected int64) error {
	cur, rev, err := s.getDefinition(ctx, tenantID, kind, id)
	if err != nil {
		return err
	}
	if expected != 0 && cur.Version != expected {
		return fmt.Errorf("embedded: %s %q: stored version %d, expected %d: %w", kind, id, cur.Version, expected, store.ErrConflict)
	}
	err = s.definitions.Delete(ctx, definitionKey(tenantID, kind, id), jetstream.LastRevision(rev))
	if kvcas.IsConflict(err) {
		return fmt.Errorf("embedded: %s %q: %w", kind, id, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("embedded: delete %s %q: %w", kind, id, err)
	}
	return nil
}
