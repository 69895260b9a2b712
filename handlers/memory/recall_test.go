package memory_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestRecallKeepsToItsScopesAndBudget: a run recalls its tenant's facts,
// its user's and its session's, never another user's or session's, best
// first, within the token budget (a memory too long for what is left is
// passed over for a shorter one) and above the least score; an expired
// memory is never recalled; a negative top k recalls nothing.
func TestRecallKeepsToItsScopesAndBudget(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	now := time.Now().UTC()
	put := func(key, scope, user, session, text string, ttl time.Time) {
		t.Helper()
		vec, err := memory.Embed(ctx, handlerstest.Embedder, text)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Store.PutMemory(ctx, store.Memory{ID: key, Key: key, TenantID: handlerstest.Tenant, Scope: scope,
			UserID: user, SessionID: session, Text: text, Embedding: vec, CreatedAt: now, TTLAt: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	tn := handlerstest.Tenant
	long := "outlet engagement " + strings.Repeat("details of the outlets and their engagement ", 30)
	put(tn+":@tenant:policy", store.ScopeTenant, "", "", "outlet engagement is scored weekly", time.Time{})
	put(tn+":@user:u1:long", store.ScopeUser, "u1", "", long, time.Time{})
	put(tn+":@user:u1:short", store.ScopeUser, "u1", "", "rank outlets by engagement first", time.Time{})
	put(tn+":@user:u1:old", store.ScopeUser, "u1", "", "rank the outlets by engagement", now.Add(-time.Minute))
	put(tn+":@user:u2:fact", store.ScopeUser, "u2", "", "rank the outlets by engagement", time.Time{})
	put(tn+":s1:task:out", store.ScopeSession, "u1", "s1", "active outlets ranked by engagement", time.Time{})
	put(tn+":s2:task:out", store.ScopeSession, "u1", "s2", "active outlets ranked by engagement", time.Time{})

	req := orch.RunRequest{RunID: "r", TenantID: tn, UserID: "u1", SessionID: "s1", Message: handlerstest.RankTask}
	r := &memory.Recall{Store: env.Store, Embedder: handlerstest.Embedder, TopK: 10, Tokens: 60, MinScore: 0.05}
	got, err := r.Memories(ctx, req, now)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	tokens := 0
	for i, m := range got {
		ids = append(ids, m.ID)
		tokens += orch.MemoryTokens(m.Text)
		if i > 0 && m.Score > got[i-1].Score {
			t.Errorf("not best first: %+v", got)
		}
	}
	want := []string{tn + ":@tenant:policy", tn + ":@user:u1:short", tn + ":s1:task:out"}
	slices.Sort(ids)
	if !slices.Equal(ids, want) || tokens > 60 {
		t.Fatalf("recalled %v (%d tokens), want %v within 60 tokens", ids, tokens, want)
	}
	r.TopK = -1
	if got, err := r.Memories(ctx, req, now); err != nil || got != nil {
		t.Fatalf("a negative top k recalled %v, %v", got, err)
	}
}

// TestPrunerDeletesExpiredMemories: the pruner deletes the memories whose
// ttl_at has passed at once, and keeps the others.
func TestPrunerDeletesExpiredMemories(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	now := time.Now().UTC()
	for key, ttl := range map[string]time.Time{"t:@user:u:gone": now.Add(-time.Second), "t:@user:u:kept": now.Add(time.Hour)} {
		if _, err := env.Store.PutMemory(ctx, store.Memory{ID: key, Key: key, TenantID: "t", Scope: store.ScopeUser, UserID: "u",
			Text: "x", CreatedAt: now.Add(-time.Hour), TTLAt: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan int, 1)
	go (&memory.Pruner{Store: env.Store, Every: time.Hour}).Run(ctx, func(n int, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- n
	})
	if n := <-done; n != 1 {
		t.Fatalf("pruned %d memories, want 1", n)
	}
	if _, err := env.Store.GetMemory(ctx, "t:@user:u:gone"); err == nil {
		t.Fatal("the expired memory is still stored")
	}
	if _, err := env.Store.GetMemory(ctx, "t:@user:u:kept"); err != nil {
		t.Fatalf("the live memory: %v", err)
	}
}

// TestRetentionSetsTTLByScope: a scope's retention sets ttl_at from the
// creation time; none keeps the memory for ever.
func TestRetentionSetsTTLByScope(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := store.MemoryRetention{Session: time.Hour, User: 48 * time.Hour}
	if got := r.TTLAt(store.ScopeSession, at); !got.Equal(at.Add(time.Hour)) {
		t.Errorf("session ttl_at %v", got)
	}
	if got := r.TTLAt(store.ScopeUser, at); !got.Equal(at.Add(48 * time.Hour)) {
		t.Errorf("user ttl_at %v", got)
	}
	if got := r.TTLAt(store.ScopeTenant, at); !got.IsZero() {
		t.Errorf("tenant ttl_at %v, want none", got)
	}
}
