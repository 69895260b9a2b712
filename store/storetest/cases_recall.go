package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/agentbus/agentbus/store"
)

// testRecallWithin: a run's recall (Within: its tenant's facts, its
// user's memories, its session's) of three tenants holding the same
// texts returns only the run's own tenant's memories of those scopes:
// never another tenant's, another user's or another session's.
func testRecallWithin(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	emb := store.NewHashEmbedder(Dimension)
	const text = "my home city is Melbourne"
	put := func(f fixture, key, scope, user, session string) string {
		t.Helper()
		m := f.memory("x", text)
		m.Key, m.Scope, m.UserID, m.SessionID = key, scope, user, session
		m.Embedding = embed(ctx, t, emb, text)
		_, err := b.PutMemory(ctx, m)
		must(t, "PutMemory", err)
		return key
	}
	var want []string
	tenants := []fixture{newFixture(), newFixture(), newFixture()}
	for i, f := range tenants {
		tf := put(f, f.tenant+":@tenant:fact", store.ScopeTenant, "", "")
		u1 := put(f, f.tenant+":@user:u1:fact", store.ScopeUser, "u1", "")
		put(f, f.tenant+":@user:u2:fact", store.ScopeUser, "u2", "")
		s1 := put(f, f.tenant+":"+f.session+":task-1:out", store.ScopeSession, "u1", f.session)
		put(f, f.tenant+":other-session:task-1:out", store.ScopeSession, "u1", "other-session")
		put(f, f.tenant+":"+f.session+":task-2:out", store.ScopeSession, "u2", f.session)
		if i == 0 {
			want = []string{tf, u1, s1}
		}
	}
	f := tenants[0]
	q := store.MemoryQuery{TenantID: f.tenant, Vector: embed(ctx, t, emb, "which city is my home"), TopK: 20,
		Within: []store.MemorySelector{{Scope: store.ScopeTenant}, {Scope: store.ScopeUser, UserID: "u1"},
			{Scope: store.ScopeSession, SessionID: f.session, UserID: "u1"}}}
	hits, err := b.QueryMemory(ctx, q)
	must(t, "QueryMemory within", err)
	got := hitKeys(hits)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("recall returned %v, want %v", got, want)
	}
	for _, h := range hits {
		if h.Score <= 0 || h.Version.IsZero() {
			t.Fatalf("hit %q: score %v, version %+v", h.Key, h.Score, h.Version)
		}
	}
	// Nothing in scope: no hit.
	q.Within = []store.MemorySelector{{Scope: store.ScopeUser, UserID: "nobody"}}
	hits, err = b.QueryMemory(ctx, q)
	must(t, "QueryMemory within nobody's memories", err)
	if len(hits) != 0 {
		t.Fatalf("an unknown user recalled %v", hitKeys(hits))
	}
	q.Within = []store.MemorySelector{{Scope: store.ScopeUser}}
	_, err = b.QueryMemory(ctx, q)
	wantErr(t, "QueryMemory with a user selector naming no user", err, store.ErrInvalidArgument)
}

// testMemoryExpiry: a memory whose ttl_at has passed is no query's hit,
// and PruneMemory deletes it and only it.
func testMemoryExpiry(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	expired := f.memory("expired", `{"v":1}`)
	expired.Embedding, expired.CreatedAt, expired.TTLAt = vec(1, 0), past.Add(-time.Hour), past
	live := f.memory("live", `{"v":2}`)
	live.Embedding, live.TTLAt = vec(1, 0.1), past.Add(100*365*24*time.Hour)
	forever := f.memory("forever", `{"v":3}`)
	forever.Embedding = vec(1, 0.2)
	for _, m := range []store.Memory{expired, live, forever} {
		_, err := b.PutMemory(ctx, m)
		must(t, "PutMemory", err)
	}
	for _, within := range [][]store.MemorySelector{nil, {{Scope: store.ScopeSession, SessionID: f.session}}} {
		hits, err := b.QueryMemory(ctx, store.MemoryQuery{TenantID: f.tenant, Vector: vec(1, 0), Within: within})
		must(t, "QueryMemory", err)
		if got := hitKeys(hits); !slices.Equal(got, []string{live.Key, forever.Key}) {
			t.Fatalf("query (within %v) returned %v, want [%s %s]", within, got, live.Key, forever.Key)
		}
		// Judged at a time before the expiry, the memory is a hit.
		hits, err = b.QueryMemory(ctx, store.MemoryQuery{TenantID: f.tenant, Vector: vec(1, 0), Within: within,
			At: past.Add(-time.Minute)})
		must(t, "QueryMemory before expiry", err)
		if got := hitKeys(hits); len(got) != 3 || got[0] != expired.Key {
			t.Fatalf("query before expiry returned %v, want %s first of 3", got, expired.Key)
		}
	}
	n, err := b.PruneMemory(ctx, past.Add(time.Second))
	must(t, "PruneMemory", err)
	if n < 1 {
		t.Fatalf("PruneMemory deleted %d memories, want at least the expired one", n)
	}
	_, err = b.GetMemory(ctx, expired.Key)
	wantErr(t, "GetMemory of a pruned memory", err, store.ErrNotFound)
	for _, m := range []store.Memory{live, forever} {
		_, err := b.GetMemory(ctx, m.Key)
		must(t, "GetMemory of a live memory after the prune", err)
	}
}
