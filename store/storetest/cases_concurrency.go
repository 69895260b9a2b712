package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/agentbus/agentbus/store"
)

func testOptimisticConcurrency(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()

	base, err := b.PutMemory(ctx, f.memory("counter", `{"n":0}`))
	must(t, "PutMemory", err)

	// Two writers read the same version; only the first may win.
	w1, w2 := base, base
	w1.Text, w2.Text = `{"n":1}`, `{"n":2}`
	won, err := b.PutMemory(ctx, w1)
	must(t, "first conditional PutMemory", err)
	if won.Version == base.Version {
		t.Fatalf("conditional PutMemory kept version %+v", won.Version)
	}
	_, err = b.PutMemory(ctx, w2)
	wantErr(t, "second conditional PutMemory", err, store.ErrConflict)
	got, err := b.GetMemory(ctx, base.Key)
	must(t, "GetMemory", err)
	if got.Text != w1.Text || got.Version != won.Version {
		t.Fatalf("stored %q %+v, want winner %q %+v", got.Text, got.Version, w1.Text, won.Version)
	}

	// The winner's returned version is usable for the next write.
	won.Text = `{"n":3}`
	_, err = b.PutMemory(ctx, won)
	must(t, "PutMemory with returned version", err)

	// A zero version is an unconditional upsert.
	up := f.memory("counter", `{"n":4}`)
	_, err = b.PutMemory(ctx, up)
	must(t, "unconditional PutMemory", err)

	// A conditional write to a missing document conflicts.
	missing := f.memory("missing", "{}")
	missing.Version = won.Version
	_, err = b.PutMemory(ctx, missing)
	wantErr(t, "conditional PutMemory of missing doc", err, store.ErrConflict)
	_, err = b.GetMemory(ctx, missing.Key)
	wantErr(t, "GetMemory after conflicting put", err, store.ErrNotFound)

	// CreateMemory succeeds once.
	c := f.memory("lock", `{"owner":"a"}`)
	created, err := b.CreateMemory(ctx, c)
	must(t, "CreateMemory", err)
	if created.Version.IsZero() {
		t.Fatalf("CreateMemory returned zero version")
	}
	c.Text = `{"owner":"b"}`
	_, err = b.CreateMemory(ctx, c)
	wantErr(t, "second CreateMemory", err, store.ErrConflict)

	// Concurrent creators: exactly one wins.
	const n = 8
	race := f.memory("race", "{}")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			m := race
			m.Text = fmt.Sprintf(`{"writer":%d}`, i)
			_, errs[i] = b.CreateMemory(ctx, m)
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		default:
			wantErr(t, "racing CreateMemory", err, store.ErrConflict)
		}
	}
	if wins != 1 {
		t.Fatalf("%d concurrent CreateMemory calls succeeded, want 1", wins)
	}
}

func testStalePlan(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()

	newer := f.plan(store.PlanStatusExecuting, 0)
	must(t, "PutPlan v2", b.PutPlan(ctx, newer, 2))

	older := newer
	older.Status = store.PlanStatusPlanning
	wantErr(t, "PutPlan v1", b.PutPlan(ctx, older, 1), store.ErrStale)
	wantErr(t, "PutPlan v2 different content", b.PutPlan(ctx, older, 2), store.ErrStale)
	must(t, "PutPlan v2 identical content", b.PutPlan(ctx, newer, 2))

	got, version, err := b.GetPlan(ctx, f.tenant, newer.PlanID)
	must(t, "GetPlan", err)
	if version != 2 || got.Status != store.PlanStatusExecuting {
		t.Fatalf("stored %q at v%d, want %q at v2", got.Status, version, store.PlanStatusExecuting)
	}

	done := newer
	done.Status = store.PlanStatusComplete
	done.CompletedAt = f.at(60)
	must(t, "PutPlan v3", b.PutPlan(ctx, done, 3))
	got, version, err = b.GetPlan(ctx, f.tenant, newer.PlanID)
	must(t, "GetPlan", err)
	if version != 3 {
		t.Fatalf("version %d, want 3", version)
	}
	sameJSON(t, "plan v3", got, done)
}

func testConcurrentPlanWriters(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	p := f.plan(store.PlanStatusExecuting, 0)

	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	for v := 1; v <= n; v++ {
		wg.Go(func() {
			q := p
			q.ReplanCount = v // distinct content per version
			errs[v] = b.PutPlan(ctx, q, int64(v))
		})
	}
	wg.Wait()
	for v := 1; v <= n; v++ {
		if errs[v] != nil {
			wantErr(t, fmt.Sprintf("PutPlan v%d", v), errs[v], store.ErrStale)
		}
	}
	if errs[n] != nil {
		t.Fatalf("highest version rejected: %v", errs[n])
	}
	got, version, err := b.GetPlan(ctx, f.tenant, p.PlanID)
	must(t, "GetPlan", err)
	if version != n || got.ReplanCount != n {
		t.Fatalf("stored v%d (replan_count %d), want v%d", version, got.ReplanCount, n)
	}
}
