package storetest

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/store"
)

func testTenantFilteredSimilarity(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	emb := store.NewHashEmbedder(Dimension)
	a, other, third := newFixture(), newFixture(), newFixture()
	const query = "quarterly revenue report for the sales team"

	versions := map[string]store.Version{}
	put := func(f fixture, label, text, scope, user string) store.Memory {
		t.Helper()
		m := f.memory(label, text)
		m.Scope, m.UserID = scope, user
		m.Embedding = embed(ctx, t, emb, text)
		stored, err := b.PutMemory(ctx, m)
		must(t, "PutMemory", err)
		versions[m.Key] = stored.Version
		return m
	}
	// Tenant B holds the exact query text: the closest possible vector.
	put(other, "exact", query, "session", "user-1")
	put(third, "close", "quarterly revenue report for sales", "user", "user-1")
	near := put(a, "near", "revenue report for sales", "session", "user-1")
	far := put(a, "far", "kitten pictures and cat videos", "session", "user-1")
	user2 := put(a, "user2", "quarterly revenue report", "session", "user-2")
	userScoped := put(a, "facts", "sales team revenue", "user", "user-1")
	noVector := a.memory("novector", "quarterly revenue report")
	_, err := b.PutMemory(ctx, noVector)
	must(t, "PutMemory without embedding", err)

	qv := embed(ctx, t, emb, query)
	hits, err := b.QueryMemory(ctx, store.MemoryQuery{TenantID: a.tenant, Vector: qv, TopK: 10})
	must(t, "QueryMemory", err)
	keys := make([]string, len(hits))
	for i, h := range hits {
		keys[i] = h.Key
		if h.TenantID != a.tenant {
			t.Fatalf("tenant %s query returned tenant %s memory %q", a.tenant, h.TenantID, h.Key)
		}
		if i > 0 && h.Score > hits[i-1].Score {
			t.Fatalf("hits not ordered by score: %v", hits)
		}
		if want := store.Cosine(qv, h.Embedding); math.Abs(float64(want-h.Score)) > 1e-3 {
			t.Fatalf("hit %q score %v, cosine %v", h.Key, h.Score, want)
		}
		if h.Version != versions[h.Key] {
			t.Fatalf("hit %q version %+v, PutMemory returned %+v", h.Key, h.Version, versions[h.Key])
		}
	}
	if len(hits) != 4 || hits[len(hits)-1].Key != far.Key {
		t.Fatalf("got hits %v, want 4 with %q last", keys, far.Key)
	}
	if slices.Contains(keys, noVector.Key) {
		t.Fatalf("memory without embedding returned: %v", keys)
	}

	hits, err = b.QueryMemory(ctx, store.MemoryQuery{TenantID: a.tenant, Vector: qv, TopK: 1})
	must(t, "QueryMemory TopK 1", err)
	if len(hits) != 1 {
		t.Fatalf("TopK 1 returned %d hits", len(hits))
	}

	hits, err = b.QueryMemory(ctx, store.MemoryQuery{TenantID: a.tenant, UserID: "user-2", Vector: qv})
	must(t, "QueryMemory by user", err)
	if len(hits) != 1 || hits[0].Key != user2.Key {
		t.Fatalf("user filter returned %v", hitKeys(hits))
	}
	hits, err = b.QueryMemory(ctx, store.MemoryQuery{TenantID: a.tenant, Scope: "session", UserID: "user-1", Vector: qv})
	must(t, "QueryMemory by scope and user", err)
	if got := hitKeys(hits); !slices.Equal(got, []string{near.Key, far.Key}) {
		t.Fatalf("scope+user filter returned %v, want [%s %s]", got, near.Key, far.Key)
	}
	hits, err = b.QueryMemory(ctx, store.MemoryQuery{TenantID: a.tenant, Scope: "user", Vector: qv})
	must(t, "QueryMemory by scope", err)
	if got := hitKeys(hits); !slices.Equal(got, []string{userScoped.Key}) {
		t.Fatalf("user scope returned %v, want [%s]", got, userScoped.Key)
	}
}

func embed(ctx context.Context, t *testing.T, e store.Embedder, text string) []float32 {
	t.Helper()
	vs, err := e.Embed(ctx, []string{text})
	must(t, "Embed", err)
	return vs[0]
}

func hitKeys(hits []store.MemoryHit) []string {
	keys := make([]string, len(hits))
	for i, h := range hits {
		keys[i] = h.Key
	}
	return keys
}

func testTraceOrdered(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	planID := "plan-" + uuid.NewString()

	e3, e1, e2 := f.event("c", 30), f.event("a", 10), f.event("b", 20)
	e2b := f.event("b-same-ts", 20) // same ts as e2, appended later
	for _, e := range []*store.Event{&e3, &e1, &e2, &e2b} {
		e.PlanID = planID
	}
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{e3, e1}))
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{e2, e2b}))

	// Same plan in another session of the tenant, plus noise.
	other := f
	other.session = "session-" + uuid.NewString()
	e0 := other.event("zero", 5)
	e0.PlanID = planID
	unrelated := f.event("unrelated", 1)
	unrelated.PlanID = "plan-" + uuid.NewString()
	foreign := newFixture().event("foreign", 0)
	foreign.PlanID = planID
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{e0, unrelated, foreign}))

	got, err := b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace by session", err)
	want := []string{unrelated.EventID, e1.EventID, e2.EventID, e2b.EventID, e3.EventID}
	if ids := eventIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("session trace %v, want %v", ids, want)
	}
	sameJSON(t, "first session event", got[1], e1)

	got, err = b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, PlanID: planID})
	must(t, "Trace by plan", err)
	want = []string{e0.EventID, e1.EventID, e2.EventID, e2b.EventID, e3.EventID}
	if ids := eventIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("plan trace %v, want %v", ids, want)
	}

	got, err = b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: other.session, PlanID: planID})
	must(t, "Trace by session and plan", err)
	if ids := eventIDs(got); !slices.Equal(ids, []string{e0.EventID}) {
		t.Fatalf("session+plan trace %v, want [%s]", ids, e0.EventID)
	}

	// Within one millisecond ts still decides (some backends sort dates
	// in milliseconds), whatever the append order.
	late, early := f.event("late", 40), f.event("early", 40)
	late.TS = late.TS.Add(300 * time.Microsecond)
	early.TS = early.TS.Add(100 * time.Microsecond)
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{late, early}))
	got, err = b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace by session", err)
	want = []string{unrelated.EventID, e1.EventID, e2.EventID, e2b.EventID, e3.EventID, early.EventID, late.EventID}
	if ids := eventIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("session trace %v, want %v", ids, want)
	}
	sameJSON(t, "sub-millisecond event", got[5], early)
}

func testDuplicateEventIDs(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	e1, e2 := f.event("a", 1), f.event("b", 2)
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{e1, e2, e1}))
	must(t, "AppendEvents again", b.AppendEvents(ctx, []store.Event{e2, e1}))
	got, err := b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace", err)
	if ids := eventIDs(got); !slices.Equal(ids, []string{e1.EventID, e2.EventID}) {
		t.Fatalf("trace %v, want each event once", ids)
	}
}

func testPlanHealth(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f, other := newFixture(), newFixture()
	for _, p := range []store.Plan{
		f.plan(store.PlanStatusComplete, 1),
		f.plan(store.PlanStatusComplete, 0),
		f.plan(store.PlanStatusFailed, 2),
		f.plan(store.PlanStatusExecuting, 1),
		other.plan(store.PlanStatusFailed, 5),
	} {
		must(t, "PutPlan", b.PutPlan(ctx, p, 1))
	}
	h, err := b.Health(ctx, f.tenant)
	must(t, "Health", err)
	if h.Plans != 4 || h.Complete != 2 || h.Failed != 1 {
		t.Fatalf("counts %+v, want 4 plans, 2 complete, 1 failed", h)
	}
	if math.Abs(h.SuccessRate-2.0/3.0) > 1e-9 || math.Abs(h.AvgReplans-1.0) > 1e-9 {
		t.Fatalf("rates %+v, want success 2/3 and avg replans 1", h)
	}
	want := map[string]int{store.PlanStatusComplete: 2, store.PlanStatusFailed: 1, store.PlanStatusExecuting: 1}
	for status, n := range want {
		if h.ByStatus[status] != n {
			t.Fatalf("ByStatus %v, want %v", h.ByStatus, want)
		}
	}
	if len(h.ByStatus) != len(want) {
		t.Fatalf("ByStatus %v, want %v", h.ByStatus, want)
	}
}
