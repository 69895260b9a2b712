package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/store"
)

// Backend is the method set the contract suite exercises; every storage
// backend implements it.
//
// Every write validates its document first and returns *store.SchemaError
// without writing on a violation. Reads of absent documents return
// store.ErrNotFound; malformed requests return store.ErrInvalidArgument.
type Backend interface {
	// PutMemory upserts m when m.Version is zero, otherwise writes only if
	// the stored version equals m.Version (else store.ErrConflict, also
	// when the document is missing). It returns m with its new Version.
	PutMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	// CreateMemory writes m only if m.Key is absent, else store.ErrConflict.
	CreateMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	// GetMemory returns the memory stored under key, with its Version.
	GetMemory(ctx context.Context, key string) (store.Memory, error)
	// QueryMemory returns the tenant's TopK memories most similar to
	// q.Vector (cosine), best first, among those q.Match accepts (its
	// scope, user and selectors; none expired); TenantID is required.
	QueryMemory(ctx context.Context, q store.MemoryQuery) ([]store.MemoryHit, error)
	// PruneMemory deletes the memories whose ttl_at is at or before
	// before, and returns how many.
	PruneMemory(ctx context.Context, before time.Time) (int, error)
	// PutPlan stores p only if version is greater than the stored one,
	// else store.ErrStale (re-writing identical content at the stored
	// version succeeds).
	PutPlan(ctx context.Context, p store.Plan, version int64) error
	// GetPlan returns the stored plan of the tenant and its version;
	// another tenant's plan is store.ErrNotFound.
	GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error)
	// AppendEvents validates the whole batch, then stores each event once
	// per event id.
	AppendEvents(ctx context.Context, evs []store.Event) error
	// Trace returns a session's or plan's events ordered by ts, then by
	// append order.
	Trace(ctx context.Context, q store.TraceQuery) ([]store.Event, error)
	// Events returns the tenant's events matching q's filters, each event
	// id once, newest first (ts descending, then event_id ascending), at
	// most q.EffectiveLimit() of them, as store.EventQuery specifies; an
	// empty TenantID is store.ErrInvalidArgument.
	Events(ctx context.Context, q store.EventQuery) ([]store.Event, error)
	// PutSoul upserts the soul of (s.TenantID, s.UserID).
	PutSoul(ctx context.Context, s store.Soul) error
	// GetSoul returns the soul of (tenantID, userID).
	GetSoul(ctx context.Context, tenantID, userID string) (store.Soul, error)
	// SoulFor returns the soul a run of userID sees: the user's own, else
	// the tenant's.
	SoulFor(ctx context.Context, tenantID, userID string) (store.Soul, error)
	// PutSession upserts a session.
	PutSession(ctx context.Context, s store.Session) error
	// GetSession returns the session of the tenant; session ids are
	// unique within a tenant only.
	GetSession(ctx context.Context, tenantID, sessionID string) (store.Session, error)
	// ListSessions returns the tenant's sessions q selects, newest first,
	// as store.SessionQuery specifies (a session put shows within the
	// backend's refresh interval).
	ListSessions(ctx context.Context, q store.SessionQuery) ([]store.Session, error)
	// PutDefinition creates d (expected 0; d.Version 1; store.ErrConflict
	// if it exists) or replaces it if its stored version is expected
	// (d.Version expected+1; store.ErrNotFound if missing,
	// store.ErrConflict if the version differs).
	PutDefinition(ctx context.Context, d store.Definition, expected int64) error
	// GetDefinition returns the tenant's definition of kind and id.
	GetDefinition(ctx context.Context, tenantID, kind, id string) (store.Definition, error)
	// ListDefinitions returns the tenant's definitions of kind by id.
	ListDefinitions(ctx context.Context, tenantID, kind string) ([]store.Definition, error)
	// DeleteDefinition deletes a definition, if its version is expected
	// (0: any version).
	DeleteDefinition(ctx context.Context, tenantID, kind, id string, expected int64) error
	// PutExecution writes an execution record, replacing the one of the
	// same (tenant, execution id).
	PutExecution(ctx context.Context, e store.Execution) error
	// GetExecution returns the tenant's record of an execution, while it
	// is younger than the backend's TTL.
	GetExecution(ctx context.Context, tenantID, id string) (store.Execution, error)
	// ListExecutions returns the tenant's records q selects, newest
	// first, as store.ExecutionQuery specifies.
	ListExecutions(ctx context.Context, q store.ExecutionQuery) ([]store.Execution, error)
	// Health aggregates the tenant's plans as store.ComputePlanHealth does.
	Health(ctx context.Context, tenantID string) (store.PlanHealth, error)
	// Close releases the backend.
	Close() error
}

// Run runs the contract suite. newStore is called once per sub-test and
// must return a ready Backend; the suite closes it when the sub-test ends.
func Run(t *testing.T, newStore func(t *testing.T) Backend) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"RoundTrip", testRoundTrip},
		{"NotFound", testNotFound},
		{"InvalidArguments", testInvalidArguments},
		{"SchemaViolation", testSchemaViolation},
		{"OptimisticConcurrency", testOptimisticConcurrency},
		{"StalePlan", testStalePlan},
		{"ConcurrentPlanWriters", testConcurrentPlanWriters},
		{"TenantFilteredSimilarity", testTenantFilteredSimilarity},
		{"RecallWithin", testRecallWithin},
		{"MemoryExpiry", testMemoryExpiry},
		{"TraceOrdered", testTraceOrdered},
		{"DuplicateEventIDs", testDuplicateEventIDs},
		{"PlanHealth", testPlanHealth},
		{"SpecialCharacterIDs", testSpecialCharacterIDs},
		{"TraceLarge", testTraceLarge},
		{"EventsFiltered", testEventsFiltered},
		{"EventsLimit", testEventsLimit},
		{"TenantIsolation", testTenantIsolation},
		{"Definitions", testDefinitions},
		{"DefinitionVersions", testDefinitionVersions},
		{"DefinitionsIsolated", testDefinitionsIsolated},
		{"SessionsListed", testSessionsListed},
		{"ExecutionsListed", testExecutionsListed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newStore(t)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			c.fn(t, b)
		})
	}
}

// Dimension is the length of every embedding and query vector the suite
// stores or queries with. A backend whose vector field has a fixed
// dimension (OpenSearch's knn_vector) must be configured with it.
const Dimension = 64

// vec returns a Dimension-long vector starting with head, zero-padded.
// Padding with zeros changes no cosine similarity.
func vec(head ...float32) []float32 {
	v := make([]float32, Dimension)
	copy(v, head)
	return v
}

// fixture produces unique ids and sample documents for one sub-test.
type fixture struct {
	tenant  string
	session string
	base    time.Time
}

func newFixture() fixture {
	return fixture{
		tenant:  "tenant-" + uuid.NewString(),
		session: "session-" + uuid.NewString(),
		base:    time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
	}
}

func (f fixture) at(sec int) time.Time { return f.base.Add(time.Duration(sec) * time.Second) }

// memory returns a valid memory whose key has the agentbus shape
// "tenant:session:task:label" (characters KV keys do not allow).
func (f fixture) memory(label, text string) store.Memory {
	return store.Memory{
		ID:        uuid.NewString(),
		TenantID:  f.tenant,
		SessionID: f.session,
		TaskID:    "task-1",
		UserID:    "user-1",
		Scope:     "session",
		Key:       f.tenant + ":" + f.session + ":task-1:" + label,
		Text:      text,
		Source:    "test",
		CreatedAt: f.at(0),
	}
}

func (f fixture) plan(status string, replans int) store.Plan {
	return store.Plan{
		PlanID:      "plan-" + uuid.NewString(),
		SessionID:   f.session,
		TenantID:    f.tenant,
		UserID:      "user-1",
		Status:      status,
		ReplanCount: replans,
		CreatedAt:   f.at(0),
	}
}

func (f fixture) event(typ string, sec int) store.Event {
	return store.Event{
		EventID:   uuid.NewString(),
		TenantID:  f.tenant,
		SessionID: f.session,
		EventType: typ,
		Payload:   json.RawMessage(`{"n":1}`),
		TS:        f.at(sec),
	}
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sameJSON fails the test unless got and want encode to the same JSON,
// which is exactly what a backend stores.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: marshal got: %v", what, err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatalf("%s: marshal want: %v", what, err)
	}
	if string(g) != string(w) {
		t.Fatalf("%s mismatch:\n got: %s\nwant: %s", what, g, w)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantSchemaError fails unless err is a *store.SchemaError for index and
// field.
func wantSchemaError(t *testing.T, what string, err error, index, field string) {
	t.Helper()
	var se *store.SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("%s: got %v, want *store.SchemaError", what, err)
	}
	if !errors.Is(err, store.ErrSchema) {
		t.Fatalf("%s: %v does not match store.ErrSchema", what, err)
	}
	if se.Index != index || se.Field != field {
		t.Fatalf("%s: got schema error on %s %q, want %s %q (%v)", what, se.Index, se.Field, index, field, err)
	}
}

func eventIDs(evs []store.Event) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.EventID
	}
	return ids
}
