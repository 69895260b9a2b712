package ingress_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/store"
)

// TestPostedFactsExpireByTheirScopesRetention: a fact posted to memory
// gets its scope's ttl_at (in the answer and in the store); once it has
// passed, the memory query no longer returns it.
func TestPostedFactsExpireByTheirScopesRetention(t *testing.T) {
	env := handlerstest.NewEnv(t)
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var offset atomic.Int64
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Embedder: handlerstest.Embedder,
		Retention: store.MemoryRetention{User: time.Hour, Tenant: 24 * time.Hour},
		Now:       func() time.Time { return start.Add(time.Duration(offset.Load())) }})
	user := handlerstest.Call(t, srv, "gamma", http.MethodPost, "/agent/memory",
		`{"scope":"user","user_id":"u1","label":"city","text":"my home city is Hobart"}`).Want(t, "POST user fact", http.StatusOK)
	if user.Body["ttl_at"] != start.Add(time.Hour).Format(time.RFC3339) {
		t.Fatalf("POST answered %v, want ttl_at an hour on", user.Body)
	}
	handlerstest.Call(t, srv, "gamma", http.MethodPost, "/agent/memory",
		`{"scope":"tenant","label":"city","text":"our head office city is Hobart"}`).Want(t, "POST tenant fact", http.StatusOK)
	m, err := env.Store.GetMemory(handlerstest.Ctx(t), "gamma:@tenant:city")
	if err != nil || !m.TTLAt.Equal(start.Add(24*time.Hour)) {
		t.Fatalf("stored tenant fact ttl_at %v (%v)", m.TTLAt, err)
	}
	query := func(scope string) int {
		r := handlerstest.Call(t, srv, "gamma", http.MethodGet, "/agent/memory/query?query_text=home+city+Hobart&user_id=u1&scope="+scope, "").
			Want(t, "GET /agent/memory/query", http.StatusOK)
		hits, _ := r.Body["hits"].([]any)
		return len(hits)
	}
	if u, tn := query("user"), query("tenant"); u != 1 || tn != 1 {
		t.Fatalf("%d user and %d tenant hits before the expiry, want 1 and 1", u, tn)
	}
	offset.Store(int64(2 * time.Hour))
	if u, tn := query("user"), query("tenant"); u != 0 || tn != 1 {
		t.Fatalf("%d user and %d tenant hits once the user fact expired, want 0 and 1", u, tn)
	}
}
