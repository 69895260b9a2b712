package storetest

import (
	"testing"

	"github.com/agentbus/agentbus/store"
)

// RunRestart proves durability: it writes one document of every kind
// through the Backend returned by open, closes it, then reads everything
// back through the Backend returned by reopen. reopen is responsible for
// the restart (for example stopping the broker or database process and
// starting a new one on the same data directory); it is called after the
// first Backend is closed. Memory versions must survive the restart.
func RunRestart(t *testing.T, open, reopen func(t *testing.T) Backend) {
	t.Helper()
	ctx := ctxFor(t)
	f := newFixture()

	b := open(t)
	m := f.memory("durable", `{"kept":true}`)
	m.Embedding = vec(1, 0, 0)
	putM, err := b.PutMemory(ctx, m)
	must(t, "PutMemory", err)
	p := f.plan(store.PlanStatusComplete, 1)
	must(t, "PutPlan", b.PutPlan(ctx, p, 5))
	evs := []store.Event{f.event("b", 2), f.event("a", 1)}
	must(t, "AppendEvents", b.AppendEvents(ctx, evs))
	soul := store.Soul{ID: "soul-1", TenantID: f.tenant, Persona: store.Persona{Name: "Ada"}}
	must(t, "PutSoul", b.PutSoul(ctx, soul))
	sess := store.Session{SessionID: f.session, TenantID: f.tenant, State: "active", StartedAt: f.at(0)}
	must(t, "PutSession", b.PutSession(ctx, sess))
	must(t, "Close", b.Close())

	b = reopen(t)
	defer func() { must(t, "Close", b.Close()) }()

	gotM, err := b.GetMemory(ctx, m.Key)
	must(t, "GetMemory after restart", err)
	sameJSON(t, "memory", gotM, m)
	if gotM.Version != putM.Version {
		t.Fatalf("memory version %+v after restart, want %+v", gotM.Version, putM.Version)
	}
	hits, err := b.QueryMemory(ctx, store.MemoryQuery{TenantID: f.tenant, Vector: vec(1, 0, 0)})
	must(t, "QueryMemory after restart", err)
	if len(hits) != 1 || hits[0].Key != m.Key {
		t.Fatalf("QueryMemory after restart returned %v", hitKeys(hits))
	}
	gotM.Text = `{"kept":"updated"}`
	_, err = b.PutMemory(ctx, gotM)
	must(t, "conditional PutMemory after restart", err)

	gotP, version, err := b.GetPlan(ctx, f.tenant, p.PlanID)
	must(t, "GetPlan after restart", err)
	sameJSON(t, "plan", gotP, p)
	if version != 5 {
		t.Fatalf("plan version %d after restart, want 5", version)
	}
	wantErr(t, "stale PutPlan after restart", b.PutPlan(ctx, p, 4), store.ErrStale)

	trace, err := b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace after restart", err)
	sameJSON(t, "trace", trace, []store.Event{evs[1], evs[0]})

	gotSoul, err := b.GetSoul(ctx, f.tenant, "")
	must(t, "GetSoul after restart", err)
	sameJSON(t, "soul", gotSoul, soul)
	gotSess, err := b.GetSession(ctx, f.tenant, f.session)
	must(t, "GetSession after restart", err)
	sameJSON(t, "session", gotSess, sess)
}
