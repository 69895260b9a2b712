package storetest

import (
	"fmt"
	"sync"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/store"
)

// definition returns a valid version-1 definition of kind and id.
func (f fixture) definition(kind, id string) store.Definition {
	return store.Definition{TenantID: f.tenant, Kind: kind, ID: id, Name: "name of " + id, Status: "active",
		Version: 1, Spec: json.RawMessage(`{"system_prompt":"be brief","tools":["a","b"]}`),
		CreatedAt: f.at(0), UpdatedAt: f.at(0)}
}

// testDefinitions: create, read back, list by kind in id order, replace,
// delete; schema violations write nothing.
func testDefinitions(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	for _, id := range []string{"agent-b", "agent-a", "agent:c/ü"} {
		must(t, "PutDefinition "+id, b.PutDefinition(ctx, f.definition(store.KindAgent, id), 0))
	}
	trig := f.definition(store.KindTrigger, "agent-a") // same id, other kind
	must(t, "PutDefinition trigger", b.PutDefinition(ctx, trig, 0))

	got, err := b.GetDefinition(ctx, f.tenant, store.KindAgent, "agent:c/ü")
	must(t, "GetDefinition", err)
	sameJSON(t, "definition", got, f.definition(store.KindAgent, "agent:c/ü"))

	list, err := b.ListDefinitions(ctx, f.tenant, store.KindAgent)
	must(t, "ListDefinitions", err)
	if ids := definitionIDs(list); fmt.Sprint(ids) != "[agent-a agent-b agent:c/ü]" {
		t.Fatalf("listed agents %v, want [agent-a agent-b agent:c/ü]", ids)
	}
	list, err = b.ListDefinitions(ctx, f.tenant, store.KindTrigger)
	must(t, "ListDefinitions triggers", err)
	if len(list) != 1 {
		t.Fatalf("listed %d triggers, want 1", len(list))
	}
	sameJSON(t, "listed trigger", list[0], trig)

	next := f.definition(store.KindAgent, "agent-a")
	next.Version, next.Name, next.UpdatedAt = 2, "renamed", f.at(5)
	next.Spec = json.RawMessage(`{"system_prompt":"be thorough"}`)
	must(t, "PutDefinition update", b.PutDefinition(ctx, next, 1))
	got, err = b.GetDefinition(ctx, f.tenant, store.KindAgent, "agent-a")
	must(t, "GetDefinition after update", err)
	sameJSON(t, "updated definition", got, next)

	must(t, "DeleteDefinition", b.DeleteDefinition(ctx, f.tenant, store.KindAgent, "agent-b", 0))
	_, err = b.GetDefinition(ctx, f.tenant, store.KindAgent, "agent-b")
	wantErr(t, "GetDefinition after delete", err, store.ErrNotFound)
	err = b.DeleteDefinition(ctx, f.tenant, store.KindAgent, "agent-b", 0)
	wantErr(t, "DeleteDefinition twice", err, store.ErrNotFound)
	list, err = b.ListDefinitions(ctx, f.tenant, store.KindAgent)
	must(t, "ListDefinitions after delete", err)
	if ids := definitionIDs(list); fmt.Sprint(ids) != "[agent-a agent:c/ü]" {
		t.Fatalf("listed agents after delete %v", ids)
	}

	bad := f.definition(store.KindAgent, "agent-bad")
	bad.Spec = json.RawMessage(`["not an object"]`)
	wantSchemaError(t, "PutDefinition array spec", b.PutDefinition(ctx, bad, 0), store.IndexDefinitions, "/spec")
	bad = f.definition("robot", "agent-bad")
	wantSchemaError(t, "PutDefinition unknown kind", b.PutDefinition(ctx, bad, 0), store.IndexDefinitions, "/kind")
	_, err = b.GetDefinition(ctx, f.tenant, store.KindAgent, "agent-bad")
	wantErr(t, "GetDefinition after rejected writes", err, store.ErrNotFound)

	_, err = b.GetDefinition(ctx, "", store.KindAgent, "agent-a")
	wantErr(t, "GetDefinition without tenant", err, store.ErrInvalidArgument)
	_, err = b.ListDefinitions(ctx, f.tenant, "")
	wantErr(t, "ListDefinitions without kind", err, store.ErrInvalidArgument)
}

// testDefinitionVersions: a create of an existing definition, an update
// from a stale version or of a missing one, and a version that does not
// follow the expected one all fail; of concurrent updates from one
// version exactly one wins.
func testDefinitionVersions(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	d := f.definition(store.KindTrigger, "trg-1")
	must(t, "PutDefinition", b.PutDefinition(ctx, d, 0))
	wantErr(t, "create twice", b.PutDefinition(ctx, d, 0), store.ErrConflict)

	stale := d
	stale.Version = 3
	wantErr(t, "update from version 2 of a version-1 definition", b.PutDefinition(ctx, stale, 2), store.ErrConflict)
	skip := d
	skip.Version = 5
	wantErr(t, "version that does not follow", b.PutDefinition(ctx, skip, 1), store.ErrInvalidArgument)
	missing := f.definition(store.KindTrigger, "trg-missing")
	missing.Version = 2
	wantErr(t, "update of a missing definition", b.PutDefinition(ctx, missing, 1), store.ErrNotFound)
	wantErr(t, "conditional delete from a stale version", b.DeleteDefinition(ctx, f.tenant, store.KindTrigger, "trg-1", 2), store.ErrConflict)

	const writers = 6
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			next := d
			next.Version, next.Name = 2, fmt.Sprintf("writer %d", i)
			errs[i] = b.PutDefinition(ctx, next, 1)
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both updated version 1", won, i)
		case err == nil:
			won = i
		default:
			wantErr(t, fmt.Sprintf("writer %d", i), err, store.ErrConflict)
		}
	}
	if won < 0 {
		t.Fatal("no writer updated version 1")
	}
	got, err := b.GetDefinition(ctx, f.tenant, store.KindTrigger, "trg-1")
	must(t, "GetDefinition", err)
	if got.Version != 2 || got.Name != fmt.Sprintf("writer %d", won) {
		t.Fatalf("stored version %d by %q, want version 2 by writer %d", got.Version, got.Name, won)
	}
	must(t, "conditional delete", b.DeleteDefinition(ctx, f.tenant, store.KindTrigger, "trg-1", 2))
}

// testDefinitionsIsolated: another tenant's definition of the same kind
// and id is another document, invisible to reads, lists and deletes.
func testDefinitionsIsolated(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f, g := newFixture(), newFixture()
	must(t, "PutDefinition f", b.PutDefinition(ctx, f.definition(store.KindAgent, "shared"), 0))
	must(t, "PutDefinition f only", b.PutDefinition(ctx, f.definition(store.KindAgent, "f-only"), 0))
	gd := g.definition(store.KindAgent, "shared")
	gd.Name = "g's own"
	must(t, "PutDefinition g", b.PutDefinition(ctx, gd, 0))

	got, err := b.GetDefinition(ctx, g.tenant, store.KindAgent, "shared")
	must(t, "GetDefinition g", err)
	sameJSON(t, "g's definition", got, gd)
	_, err = b.GetDefinition(ctx, g.tenant, store.KindAgent, "f-only")
	wantErr(t, "GetDefinition of another tenant's", err, store.ErrNotFound)
	err = b.DeleteDefinition(ctx, g.tenant, store.KindAgent, "f-only", 0)
	wantErr(t, "DeleteDefinition of another tenant's", err, store.ErrNotFound)
	list, err := b.ListDefinitions(ctx, g.tenant, store.KindAgent)
	must(t, "ListDefinitions g", err)
	if ids := definitionIDs(list); fmt.Sprint(ids) != "[shared]" || list[0].Name != "g's own" {
		t.Fatalf("g lists %v", ids)
	}
	// A tenant id that is another's with a suffix shares no key prefix.
	h := f
	h.tenant = f.tenant + ".x"
	list, err = b.ListDefinitions(ctx, h.tenant, store.KindAgent)
	must(t, "ListDefinitions of a longer tenant id", err)
	if len(list) != 0 {
		t.Fatalf("tenant %q lists %v", h.tenant, definitionIDs(list))
	}
}

func definitionIDs(ds []store.Definition) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}
