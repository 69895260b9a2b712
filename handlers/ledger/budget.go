package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
)

// BucketBudgets holds the pools of parallel groups: what the members of
// a group dispatched together drew beyond their shares, keyed
// <tenant>.<run_id>.<group_id>.
const BucketBudgets = "budgets"

// Budgets enforces runs' budgets (seed 003's budget vector). A run's
// ledger is its state: what its finished work drew (orch.State.Known)
// travels in every message, so a hop draws from its own copy in memory,
// with no round trip, and reports what it drew with its result. Only the
// members of a group dispatched together share anything: each draws its
// share (orch.LaneShare) in memory and tops up from the group's pool, an
// entry of the budgets bucket moved by compare-and-set, only when it
// needs more than its share. No draw takes a counter past its limit: a
// call that would is not made. A nil Budgets enforces nothing.
type Budgets struct {
	// KV is the budgets bucket (the groups' pools); nil leaves each
	// member of a group its share alone.
	KV jetstream.KeyValue
	// Quotas is the quotas bucket: the token quotas' ledgers and the
	// runs' leases of them (quota.go); nil enforces no quota.
	Quotas jetstream.KeyValue
	Now    func() time.Time
}

// RunBudget is one hop's ledger of a run: its limits, deadline and quotas
// as its state records them, and what the run has drawn, this hop's draws
// included. Build it once per hop (BudgetOf, StepBudget) and draw from
// that value: its copies share one ledger.
type RunBudget struct {
	Tenant, RunID string
	Limits        orch.Vector
	Deadline      time.Time
	// Quotas are the token quotas the run's model calls draw from too,
	// through the run's Lease of them (quota.go).
	Quotas []orch.Quota
	Lease  *orch.QuotaLease

	l *ledger
}

// ledger is what a hop's draws move.
type ledger struct {
	mu   sync.Mutex
	used orch.Vector // what the run has drawn, as far as this hop knows
	lane *lane       // set for a member of a group of several
	// quotaCap is what the hop may reach of the run's input plus output
	// tokens before it raises the run's lease of its quotas (a member of
	// a group: of its own tokens since dispatch).
	quotaCap float64
	// quotaShare is a group member's share of the run's lease; what it
	// draws past it comes from a lease of its own (quota.go).
	quotaShare float64
}

// lane is a group member's share of its run's budget.
type lane struct {
	key    string      // the group's pool entry
	base   orch.Vector // what the run had drawn when the group was dispatched
	share  orch.Vector // what the member may draw without asking
	pool   orch.Vector // the group's pool, what no share holds
	pooled orch.Vector // what the member has drawn from the pool so far
	step   int         // its step: names its lease of the run's quotas, past its share
}

// NewRunBudget is the ledger of a run that has drawn nothing yet.
func NewRunBudget(tenant, runID string, limits orch.Vector, deadline time.Time, quotas []orch.Quota) RunBudget {
	return RunBudget{Tenant: tenant, RunID: runID, Limits: limits, Deadline: deadline, Quotas: quotas,
		l: &ledger{used: orch.Vector{}}}
}

// BudgetOf is the ledger of a hop that works on the run as its state
// records it (the router's, the planner's).
func BudgetOf(s orch.RunState) RunBudget {
	rb := NewRunBudget(s.Request.TenantID, s.Request.RunID, s.Budget.Limits, s.Deadline, s.Budget.Quotas)
	rb.l.used = s.Known()
	return rb.WithLease(s.Budget.Lease)
}

// WithLease is rb drawing from lease, the run's lease of its quotas.
func (rb RunBudget) WithLease(lease *orch.QuotaLease) RunBudget {
	rb.Lease = lease
	if rb.l != nil && lease != nil {
		rb.l.quotaCap = lease.Tokens
	}
	return rb
}

// StepBudget is the ledger of an executor's turn: the run as dispatched,
// plus what the step's earlier turns drew; a member of a group of several
// draws from its share and the group's pool.
func StepBudget(req orch.StepRequest) RunBudget {
	rb := BudgetOf(req.Run)
	rb.l.used = rb.l.used.Add(req.Spent).Add(orch.UsageVector(req.Usage.InputTokens, req.Usage.OutputTokens, req.Usage.Calls, req.Usage.CostUSD))
	if req.Group.Expected > 1 {
		share, pool := orch.LaneShare(req.Run.Remaining(), req.Group.Expected)
		rb.l.lane = &lane{key: poolKey(rb.Tenant, rb.RunID, req.Group.ID), base: req.Run.Known(),
			share: share, pool: pool, pooled: req.Pooled.Add(nil)}
		// Its share of the run's lease: the part of it left at dispatch
		// that is its own.
		rb.l.quotaCap = math.Floor(max(0, rb.l.quotaCap-quotaTokens(rb.l.lane.base)) / float64(req.Group.Expected))
		rb.l.quotaShare, rb.l.lane.step = rb.l.quotaCap, req.Step
	}
	return rb
}

// poolKey is the budgets bucket's key of a group's pool:
// <tenant>.<run_id>.<group_id>, or its digest when an id holds a
// character a key may not.
func poolKey(tenant, runID, group string) string {
	key := tenant + "." + runID + "." + group
	if !kvKeyRE.MatchString(key) {
		return kvs.Key(key)
	}
	return key
}

// kvKeyRE matches what a KV key may be.
var kvKeyRE = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*$`)

// Used is what the run has drawn as far as this hop knows.
func (rb RunBudget) Used() orch.Vector {
	if rb.l == nil {
		return orch.Vector{}
	}
	rb.l.mu.Lock()
	defer rb.l.mu.Unlock()
	return rb.l.used.Add(nil)
}

// Pooled is what a group member has drawn from its group's pool, its
// earlier turns' included: its next turn carries it (StepRequest.Pooled).
func (rb RunBudget) Pooled() orch.Vector {
	if rb.l == nil || rb.l.lane == nil {
		return nil
	}
	rb.l.mu.Lock()
	defer rb.l.mu.Unlock()
	if len(rb.l.lane.pooled) == 0 {
		return nil
	}
	return rb.l.lane.pooled.Add(nil)
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
	// Group says the draw was a group member's: Limit is what its share
	// and its group's pool let it reach, not the run's limit.
	Group bool `json:"group,omitempty"`
	// leased is what the run's lease held in the quota that refused.
	leased float64
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
	if e.Group {
		return fmt.Sprintf("budget exhausted: %s would reach %g, past the %g this lane may draw (its share and what its group's pool has left; %g used, %g more needed)",
			e.Dim, e.Used+e.Want, e.Limit, e.Used, e.Want)
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

// Reserve draws want from the run's budget, or refuses with *Exhausted
// when a dimension would pass its limit or the run's deadline passed.
// Nothing is drawn on a refusal.
func (b *Budgets) Reserve(ctx context.Context, rb RunBudget, want orch.Vector) error {
	_, err := b.Draw(ctx, rb, want)
	return err
}

// Draw is Reserve returning what the run has drawn after the draw.
func (b *Budgets) Draw(ctx context.Context, rb RunBudget, want orch.Vector) (orch.Vector, error) {
	if b == nil || rb.l == nil || len(rb.Limits) == 0 {
		return orch.Vector{}, nil
	}
	if !rb.Deadline.IsZero() && !b.now().Before(rb.Deadline) {
		lim := rb.Limits[orch.DimWallClockS]
		return orch.Vector{}, &Exhausted{Dim: orch.DimWallClockS, Limit: lim, Used: lim, Limits: rb.Limits}
	}
	l := rb.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := orch.Over(rb.Limits, l.used, want); d != "" {
		return orch.Vector{}, &Exhausted{Dim: d, Limit: rb.Limits[d], Used: l.used[d], Want: want[d], Limits: rb.Limits, Spent: l.used.Add(nil)}
	}
	if l.lane != nil {
		if err := b.topUp(ctx, rb, want); err != nil {
			return orch.Vector{}, err
		}
	}
	if b.quotas(rb) {
		if err := b.drawLease(ctx, rb, quotaTokens(want)); err != nil {
			// Nothing is drawn on a refusal (what a lane took from its
			// pool stays taken: the pool then understates what is left,
			// never overstates it).
			var ex *Exhausted
			if errors.As(err, &ex) {
				ex.Limits, ex.Spent = rb.Limits, l.used.Add(nil)
			}
			return orch.Vector{}, err
		}
	}
	l.used = l.used.Add(want)
	return l.used.Add(nil), nil
}

// topUp draws from the group's pool what want takes the member past its
// share and what it already took from the pool; with l.mu held.
func (b *Budgets) topUp(ctx context.Context, rb RunBudget, want orch.Vector) error {
	ln := rb.l.lane
	own := rb.l.used.Sub(ln.base) // what the member has drawn since dispatch
	need := orch.Vector{}
	for d, w := range want {
		if _, limited := rb.Limits[d]; !limited {
			continue // a dimension with no limit is drawn freely
		}
		if over := own[d] + w - ln.share[d] - ln.pooled[d]; w > 0 && over > 1e-9 {
			need[d] = over
		}
	}
	if len(need) == 0 {
		return nil
	}
	if b.KV == nil {
		d := orch.Over(ln.share.Add(ln.pooled), own, want)
		return &Exhausted{Dim: d, Limit: ln.base[d] + ln.share[d] + ln.pooled[d], Used: rb.l.used[d], Want: want[d],
			Limits: rb.Limits, Spent: rb.l.used.Add(nil), Group: true}
	}
	var hit *Exhausted
	_, err := kvcas.Update(ctx, b.KV, ln.key, func(p *poolEntry, _ uint64) (bool, error) {
		hit = nil
		if d := orch.Over(ln.pool, p.Drawn, need); d != "" {
			hit = &Exhausted{Dim: d, Limit: ln.base[d] + ln.share[d] + ln.pooled[d] + ln.pool[d] - p.Drawn[d],
				Used: rb.l.used[d], Want: want[d], Limits: rb.Limits, Spent: rb.l.used.Add(nil), Group: true}
			return false, nil
		}
		p.Drawn = p.Drawn.Add(need)
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("handlers: draw from the group's pool: %w", err)
	}
	if hit != nil {
		return hit
	}
	ln.pooled = ln.pooled.Add(need)
	return nil
}

// poolEntry is a group's pool: what its members drew beyond their shares.
type poolEntry struct {
	Drawn orch.Vector `json:"drawn"`
}

// Settle replaces a reservation by what the call actually used: the
// counters move by actual minus reserved in each dimension (in memory: the
// run's lease of its quotas is settled when the run ends).
func (b *Budgets) Settle(ctx context.Context, rb RunBudget, reserved, actual orch.Vector) error {
	if b == nil || rb.l == nil || len(rb.Limits) == 0 {
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
	rb.l.mu.Lock()
	rb.l.used = rb.l.used.Add(delta)
	for d, x := range rb.l.used {
		if x < 0 {
			rb.l.used[d] = 0
		}
	}
	rb.l.mu.Unlock()
	return nil
}

func (b *Budgets) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}
