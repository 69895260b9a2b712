package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/orch"
)

// BucketBudgets is the budgets ledger: what each run has drawn, keyed
// <tenant>.<run_id>.
const BucketBudgets = "budgets"

// Budgets is the budget ledger of runs (seed 003's budget vector): one
// entry per run in the budgets bucket holding what the run has drawn in
// each dimension, reservations included until they are settled. Every
// draw is a compare-and-swap on that entry, so every lane of a run, on
// any process, draws from one budget, and no draw takes a counter past
// its limit: a call that would is not made. A nil Budgets enforces
// nothing.
type Budgets struct {
	KV jetstream.KeyValue
	// Quotas is the quotas bucket: the token quotas' ledgers (see
	// DrawQuotas); nil enforces no quota.
	Quotas jetstream.KeyValue
	Now    func() time.Time

	// last caches each run's entry as this process last wrote it, so a
	// draw usually costs one round trip (an update at the known
	// revision) rather than a read and an update.
	mu   sync.Mutex
	last map[string]cachedEntry
}

type cachedEntry struct {
	entry BudgetEntry
	rev   uint64
}

// BudgetEntry is a run's ledger entry: its limits (as the drawing state
// recorded them) and what it has drawn.
type BudgetEntry struct {
	Limits orch.Vector `json:"limits"`
	Used   orch.Vector `json:"used"`
}

// RunBudget names a run's budget: its ledger key, its limits and its
// deadline (the wall-clock dimension), as its state records them.
type RunBudget struct {
	Tenant, RunID string
	Limits        orch.Vector
	Deadline      time.Time
	// Quotas are the token quotas the run's model calls draw from too.
	Quotas []orch.Quota
	// New says the run's ledger entry most likely does not exist yet (its
	// first hop's draw): the first draw creates it without reading it
	// first, and reads it only if it was there after all.
	New bool
}

// BudgetOf is the budget of a run state.
func BudgetOf(s orch.RunState) RunBudget {
	return RunBudget{Tenant: s.Request.TenantID, RunID: s.Request.RunID, Limits: s.Budget.Limits, Deadline: s.Deadline,
		Quotas: s.Budget.Quotas}
}

// ErrBudgetExhausted is wrapped by every refused draw.
var ErrBudgetExhausted = errors.New("handlers: budget exhausted")

// Exhausted is a refused draw: the dimension that would pass its limit,
// and the budget's state then. A refused wall-clock draw (the deadline
// passed) is Dim wall_clock_s.
type Exhausted struct {
	Dim    orch.Dim    `json:"dimension"`
	Limit  float64     `json:"limit"`
	Used   float64     `json:"used"`
	Want   float64     `json:"requested"`
	Limits orch.Vector `json:"limits"`
	Spent  orch.Vector `json:"used_vector"`
	// Quota, when set, is the token quota the draw would pass (Dim is
	// then quota_tokens, Limit and Used its tokens).
	Quota *QuotaHit `json:"quota,omitempty"`
}

// QuotaHit names a spent quota: which one, its ledger key and period.
type QuotaHit struct {
	orch.Quota
	Key string `json:"key"`
}

func (e *Exhausted) Error() string {
	if q := e.Quota; q != nil {
		return fmt.Sprintf("budget exhausted: the %s %s's %s token quota of %g is spent (%g used, %g more needed)",
			q.Scope, q.Subject, periodName(q.Period), q.Tokens, e.Used, e.Want)
	}
	if e.Dim == orch.DimWallClockS {
		return fmt.Sprintf("budget exhausted: the run's wall clock of %gs ran out", e.Limit)
	}
	return fmt.Sprintf("budget exhausted: %s would reach %g of its limit %g (%g used, %g more needed)",
		e.Dim, e.Used+e.Want, e.Limit, e.Used, e.Want)
}

// Unwrap makes an Exhausted match ErrBudgetExhausted.
func (e *Exhausted) Unwrap() error { return ErrBudgetExhausted }

// Evidence is the refusal as a run's detail.
func (e *Exhausted) Evidence() json.RawMessage {
	b, _ := json.Marshal(e)
	return b
}

// ledger key of a run.
func budgetKey(tenant, runID string) string { return kvKey(tenant + "." + runID) }

// maxDrawAttempts bounds the compare-and-swap retries of one draw.
const maxDrawAttempts = 64

// Reserve draws want from the run's budget, or refuses with *Exhausted
// when a dimension would pass its limit or the run's deadline passed.
// Nothing is drawn on a refusal.
func (b *Budgets) Reserve(ctx context.Context, rb RunBudget, want orch.Vector) error {
	_, err := b.Draw(ctx, rb, want)
	return err
}

// Draw is Reserve returning the run's entry after the draw.
func (b *Budgets) Draw(ctx context.Context, rb RunBudget, want orch.Vector) (BudgetEntry, error) {
	if b == nil || b.KV == nil || len(rb.Limits) == 0 {
		return BudgetEntry{}, nil
	}
	if !rb.Deadline.IsZero() && !b.now().Before(rb.Deadline) {
		lim := rb.Limits[orch.DimWallClockS]
		return BudgetEntry{}, &Exhausted{Dim: orch.DimWallClockS, Limit: lim, Used: lim, Limits: rb.Limits}
	}
	entry, err := b.update(ctx, rb, func(e *BudgetEntry) error {
		if d := orch.Over(rb.Limits, e.Used, want); d != "" {
			return &Exhausted{Dim: d, Limit: rb.Limits[d], Used: e.Used[d], Want: want[d], Limits: rb.Limits, Spent: e.Used}
		}
		e.Used = e.Used.Add(want)
		return nil
	})
	if err != nil {
		return entry, err
	}
	if err := b.DrawQuotas(ctx, rb, quotaTokens(want), true); err != nil {
		// The run's draw is taken back: nothing is drawn on a refusal.
		if _, uerr := b.update(context.WithoutCancel(ctx), rb, func(e *BudgetEntry) error {
			e.Used = e.Used.Sub(want)
			return nil
		}); uerr != nil {
			return BudgetEntry{}, errors.Join(err, uerr)
		}
		var ex *Exhausted
		if errors.As(err, &ex) {
			ex.Limits, ex.Spent = rb.Limits, entry.Used.Sub(want)
		}
		return BudgetEntry{}, err
	}
	return entry, nil
}

// Settle replaces a reservation by what the call actually used: the
// counters move by actual minus reserved in each dimension.
func (b *Budgets) Settle(ctx context.Context, rb RunBudget, reserved, actual orch.Vector) error {
	if b == nil || b.KV == nil || len(rb.Limits) == 0 {
		return nil
	}
	delta := actual.Sub(reserved)
	changed := false
	for _, x := range delta {
		changed = changed || x != 0
	}
	if !changed {
		return nil
	}
	_, err := b.update(ctx, rb, func(e *BudgetEntry) error {
		e.Used = e.Used.Add(delta)
		for d, x := range e.Used {
			if x < 0 {
				e.Used[d] = 0
			}
		}
		return nil
	})
	return errors.Join(err, b.DrawQuotas(ctx, rb, quotaTokens(delta), false))
}

// Get reads a run's ledger entry.
func (b *Budgets) Get(ctx context.Context, tenant, runID string) (BudgetEntry, error) {
	if b == nil || b.KV == nil {
		return BudgetEntry{}, jetstream.ErrKeyNotFound
	}
	e, _, err := b.read(ctx, budgetKey(tenant, runID))
	return e, err
}

// update applies change to the run's entry by compare-and-swap, from the
// cached entry first, and retries on a concurrent writer. It returns the
// entry it wrote.
func (b *Budgets) update(ctx context.Context, rb RunBudget, change func(*BudgetEntry) error) (BudgetEntry, error) {
	key := budgetKey(rb.Tenant, rb.RunID)
	cur, rev, cached := b.cached(key)
	// A new run's entry: a create at revision 0 (below) needs no read.
	cached = cached || rb.New
	for range maxDrawAttempts {
		if !cached {
			var err error
			if cur, rev, err = b.read(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return BudgetEntry{}, fmt.Errorf("handlers: read budget: %w", err)
			}
		}
		next := BudgetEntry{Limits: rb.Limits, Used: cur.Used.Add(nil)}
		if err := change(&next); err != nil {
			if cached {
				cached = false // the cache may be stale: refuse only on the stored entry
				continue
			}
			return BudgetEntry{}, err
		}
		val, err := json.Marshal(next)
		if err != nil {
			return BudgetEntry{}, err
		}
		var nrev uint64
		if rev == 0 {
			nrev, err = b.KV.Create(ctx, key, val)
		} else {
			nrev, err = b.KV.Update(ctx, key, val, rev)
		}
		if err == nil {
			b.remember(key, next, nrev)
			return next, nil
		}
		if !isConflict(err) {
			return BudgetEntry{}, fmt.Errorf("handlers: draw budget: %w", err)
		}
		cached = false // another draw came first: read and try again
	}
	return BudgetEntry{}, fmt.Errorf("handlers: draw budget: %d concurrent attempts lost the race", maxDrawAttempts)
}

func (b *Budgets) read(ctx context.Context, key string) (BudgetEntry, uint64, error) {
	e, err := b.KV.Get(ctx, key)
	if err != nil {
		return BudgetEntry{}, 0, err
	}
	var be BudgetEntry
	if err := json.Unmarshal(e.Value(), &be); err != nil {
		return BudgetEntry{}, 0, fmt.Errorf("handlers: budget entry %s: %w", key, err)
	}
	return be, e.Revision(), nil
}

// maxCachedBudgets bounds the cache; past it the cache starts over.
const maxCachedBudgets = 4096

func (b *Budgets) cached(key string) (BudgetEntry, uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.last[key]
	return c.entry, c.rev, ok
}

func (b *Budgets) remember(key string, e BudgetEntry, rev uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rememberLocked(key, e, rev)
}

// rememberLocked is remember with b.mu held.
func (b *Budgets) rememberLocked(key string, e BudgetEntry, rev uint64) {
	if b.last == nil || len(b.last) >= maxCachedBudgets {
		b.last = map[string]cachedEntry{}
	}
	b.last[key] = cachedEntry{entry: e, rev: rev}
}

func (b *Budgets) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}
