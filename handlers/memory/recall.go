package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Recall defaults.
const (
	// DefaultRecallTopK is how many memories a run recalls at most.
	DefaultRecallTopK = 5
	// DefaultRecallTokens bounds the tokens of the memories a run
	// recalls (orch.MemoryTokens of their texts).
	DefaultRecallTokens = 1000
	// DefaultRecallMinScore is the least cosine similarity to the task
	// a recalled memory has.
	DefaultRecallMinScore = 0.2
)

// Recall is what a run remembers when it starts: the TopK memories of its
// tenant (facts), its user (facts and past exchanges) and its session
// (step outputs, context values) most similar to its task, in one k-NN
// query pre-filtered by those scopes (store.MemoryQuery.Within), best
// first, within a token budget. The router records them in the run
// state, so every model of the run and a replay see the same.
type Recall struct {
	Store    RecallStore
	Embedder store.Embedder
	// TopK, Tokens and MinScore bound what is recalled; zero means
	// DefaultRecallTopK, DefaultRecallTokens, DefaultRecallMinScore, and
	// a negative TopK recalls nothing.
	TopK     int
	Tokens   int
	MinScore float32
}

// RecallStore is the memory query a recall makes.
type RecallStore interface {
	QueryMemory(ctx context.Context, q store.MemoryQuery) ([]store.MemoryHit, error)
}

// Memories recalls the memories of req's tenant, user and session most
// similar to its message, as of at. A nil Recall, one without a store or
// an embedder, or a negative TopK recalls nothing.
func (r *Recall) Memories(ctx context.Context, req orch.RunRequest, at time.Time) ([]domain.RecalledMemory, error) {
	if r == nil || r.Store == nil || r.Embedder == nil || r.TopK < 0 || strings.TrimSpace(req.Message) == "" {
		return nil, nil
	}
	vec, err := Embed(ctx, r.Embedder, req.Message)
	if err != nil {
		return nil, err
	}
	within := []store.MemorySelector{{Scope: ScopeTenant},
		{Scope: ScopeSession, SessionID: req.SessionID, UserID: req.UserID}}
	if req.UserID != "" {
		within = append(within, store.MemorySelector{Scope: ScopeUser, UserID: req.UserID})
	}
	hits, err := r.Store.QueryMemory(ctx, store.MemoryQuery{TenantID: req.TenantID, Within: within, Vector: vec,
		TopK: positive(r.TopK, DefaultRecallTopK), At: at})
	if err != nil {
		return nil, fmt.Errorf("handlers: recall: %w", err)
	}
	return r.within(hits), nil
}

// within keeps the hits, best first, that score at least MinScore and
// fit the token budget together (a memory too long for what is left is
// passed over for shorter ones).
func (r *Recall) within(hits []store.MemoryHit) []domain.RecalledMemory {
	minScore := r.MinScore
	if minScore == 0 {
		minScore = DefaultRecallMinScore
	}
	left := positive(r.Tokens, DefaultRecallTokens)
	var out []domain.RecalledMemory
	for _, h := range hits {
		n := orch.MemoryTokens(h.Text)
		if h.Score < minScore || n > left {
			continue
		}
		left -= n
		out = append(out, domain.RecalledMemory{ID: h.Key, Scope: h.Scope, Text: h.Text, Score: h.Score})
	}
	return out
}

func positive(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// DefaultPruneEvery is how often a Pruner deletes expired memories.
const DefaultPruneEvery = time.Hour

// Pruner deletes the memories whose retention has passed (their ttl_at),
// at once and then every Every: queries never return an expired memory,
// and the pruner frees its storage. Several processes may prune at once.
type Pruner struct {
	Store interface {
		PruneMemory(ctx context.Context, before time.Time) (int, error)
	}
	Every time.Duration // default DefaultPruneEvery
	Now   func() time.Time
}

// Run prunes until ctx ends, handing each prune's count and error to
// done (which may be nil).
func (p *Pruner) Run(ctx context.Context, done func(n int, err error)) {
	t := time.NewTicker(positiveDuration(p.Every, DefaultPruneEvery))
	defer t.Stop()
	for {
		now := time.Now
		if p.Now != nil {
			now = p.Now
		}
		n, err := p.Store.PruneMemory(ctx, now().UTC())
		if done != nil && ctx.Err() == nil {
			done(n, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func positiveDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}
