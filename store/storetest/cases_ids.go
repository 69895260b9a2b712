package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/store"
)

// awkward holds characters that are special in URLs, KV keys, NATS
// subjects or document ids.
const awkward = `a/b?c#d%2Fe f.g*h>i:j,k\l"m'n+o&p=q~r_s|t日本`

func testSpecialCharacterIDs(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	f.tenant += ":" + awkward
	f.session += "/" + awkward

	m := f.memory(awkward, `{"ok":true}`)
	m.Embedding = vec(1, 2, 3)
	put, err := b.PutMemory(ctx, m)
	must(t, "PutMemory", err)
	got, err := b.GetMemory(ctx, m.Key)
	must(t, "GetMemory", err)
	sameJSON(t, "memory", got, m)
	if got.Version != put.Version {
		t.Fatalf("GetMemory version %+v, PutMemory returned %+v", got.Version, put.Version)
	}
	hits, err := b.QueryMemory(ctx, store.MemoryQuery{TenantID: f.tenant, Scope: m.Scope, UserID: m.UserID, Vector: vec(1, 2, 3)})
	must(t, "QueryMemory", err)
	if keys := hitKeys(hits); !slices.Equal(keys, []string{m.Key}) {
		t.Fatalf("QueryMemory returned %v, want [%s]", keys, m.Key)
	}

	p := f.plan(store.PlanStatusExecuting, 0)
	p.PlanID += "/" + awkward
	must(t, "PutPlan", b.PutPlan(ctx, p, 1))
	gotPlan, version, err := b.GetPlan(ctx, f.tenant, p.PlanID)
	must(t, "GetPlan", err)
	sameJSON(t, "plan", gotPlan, p)
	if version != 1 {
		t.Fatalf("GetPlan version %d, want 1", version)
	}
	h, err := b.Health(ctx, f.tenant)
	must(t, "Health", err)
	if h.Plans != 1 {
		t.Fatalf("Health counted %d plans, want 1", h.Plans)
	}

	ev := f.event(awkward, 1)
	ev.EventID += "/" + awkward
	ev.PlanID = p.PlanID
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{ev}))
	for _, q := range []store.TraceQuery{
		{TenantID: f.tenant, SessionID: f.session},
		{TenantID: f.tenant, PlanID: p.PlanID},
	} {
		trace, err := b.Trace(ctx, q)
		must(t, "Trace", err)
		sameJSON(t, "trace", trace, []store.Event{ev})
	}

	// Souls are keyed by (tenant, user): neither part may bleed into the
	// other, and the tenant-wide soul is distinct from every user's.
	souls := []store.Soul{
		{ID: "tenant-wide", TenantID: f.tenant},
		{ID: "user", TenantID: f.tenant, UserID: awkward},
		{ID: "shifted", TenantID: f.tenant + ":" + awkward[:3], UserID: awkward[3:]},
		{ID: "colon-user", TenantID: f.tenant, UserID: ":"},
	}
	for _, s := range souls {
		must(t, "PutSoul", b.PutSoul(ctx, s))
	}
	for _, s := range souls {
		got, err := b.GetSoul(ctx, s.TenantID, s.UserID)
		must(t, fmt.Sprintf("GetSoul(%q, %q)", s.TenantID, s.UserID), err)
		sameJSON(t, "soul "+s.ID, got, s)
	}
	_, err = b.GetSoul(ctx, f.tenant, "nobody-"+uuid.NewString())
	wantErr(t, "GetSoul of unknown user", err, store.ErrNotFound)

	sess := store.Session{SessionID: f.session, TenantID: f.tenant, State: awkward}
	must(t, "PutSession", b.PutSession(ctx, sess))
	gotSess, err := b.GetSession(ctx, f.tenant, f.session)
	must(t, "GetSession", err)
	sameJSON(t, "session", gotSess, sess)
}

// testTraceLarge appends more events than any single read returns and
// checks the whole trace comes back in order: three events per second,
// appended in several batches, out of ts order across batches.
func testTraceLarge(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	const n, batch = 1200, 300 // batch is a multiple of the 3 events per ts
	evs := make([]store.Event, n)
	for i := range evs {
		evs[i] = f.event(fmt.Sprintf("e%04d", i), i/3)
	}
	// Append the batches newest first: ts order must win over append
	// order, and append order must decide within one ts.
	for start := n - batch; start >= 0; start -= batch {
		must(t, "AppendEvents", b.AppendEvents(ctx, evs[start:start+batch]))
	}
	got, err := b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace", err)
	if ids, want := eventIDs(got), eventIDs(evs); !slices.Equal(ids, want) {
		t.Fatalf("trace of %d events has %d, out of order or incomplete", len(want), len(ids))
	}
}
