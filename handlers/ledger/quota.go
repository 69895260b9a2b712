package ledger

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
)

// Token quotas are shared by every run of a tenant (of an agent, of a
// session), so they live in a bucket, not in a run's state. A run does not
// go to the bucket for each model call: it leases tokens.
//
//   - When a run starts, the router takes a lease (OpenLease): a chunk of
//     each quota (QuotaChunk, at most a quarter of what the quota has
//     left), recorded in the quota's ledger entry under the run's id and in
//     the run's state.
//   - The run's model calls draw from the lease in memory. One that would
//     pass it raises the lease by compare-and-set (at least a chunk more);
//     a group member draws from its share of what the lease had left at
//     fan-out and, past it, from a lease of its own (kept in the run's, by step). A raise
//     the quota cannot give
//     is refused like any budget draw (*Exhausted, dimension
//     quota_tokens): the run ends BUDGET_EXHAUSTED.
//   - When the run ends, the router settles its lease (SettleLease): the
//     entry's used count takes what the run used, and the lease goes.
//
// A quota is spent when what ended runs used plus what running runs hold
// reaches its allowance; nothing is drawn past it, so a quota is never
// overdrawn, and tokens a lease held but the run did not use return to it
// when the run ends. A run that never settles (its state lost with a
// dead-lettered message) is charged its whole lease once its deadline is
// an hour past (leaseGrace). Work that goes on after its run ended (a
// cancelled run's lane still in its model call) is not charged: its lease
// bounds it.

// BucketQuotas holds the token quotas' ledgers: for each quota in its
// current period, what ended runs used and what running runs hold, keyed
// <tenant>.tenant.<tenant>.day.<YYYYMMDD> (…month.<YYYYMM>),
// <tenant>.agent.<agent>.day.<YYYYMMDD>, <tenant>.session.<session>.total.
const BucketQuotas = "quotas"

// QuotaEntryTTL is how long a quota ledger entry outlives its last draw:
// more than a month, so an entry lasts as long as its period, and a
// session's total lasts as long as the session (30 days idle).
const QuotaEntryTTL = 32 * 24 * time.Hour

// DimQuotaTokens is the dimension a refused quota draw reports: input
// plus output tokens.
const DimQuotaTokens orch.Dim = "quota_tokens"

// leaseGrace is how long after its run's deadline a lease that was never
// settled is charged whole.
const leaseGrace = time.Hour

// quotaEntry is a quota's ledger in one period: the tokens ended runs
// used, and the leases of running runs by run id.
type quotaEntry struct {
	Used   float64               `json:"used"`
	Leases map[string]quotaLease `json:"leases,omitempty"`
}

type quotaLease struct {
	Tokens float64   `json:"tokens"`
	Until  time.Time `json:"until"`
	// Members are the leases the run's parallel group members hold past
	// their shares of Tokens, by step; settled, and charged when given
	// up on, with the run's.
	Members map[int]float64 `json:"members,omitempty"`
}

// total is what the lease holds, its members' with the run's.
func (l quotaLease) total() float64 {
	t := l.Tokens
	for _, m := range l.Members {
		t += m
	}
	return t
}

// held is what the entry's leases hold, after charging the ones whose
// runs were given up on (at now).
func (e *quotaEntry) held(now time.Time) float64 {
	var h float64
	for id, l := range e.Leases {
		if now.After(l.Until) {
			e.Used += l.total()
			delete(e.Leases, id)
			continue
		}
		h += l.total()
	}
	return h
}

// lease is what the entry holds for run: for step 0 the run's lease and
// its members' together (what the run's draws, which count its members',
// are held by); otherwise the lease of its group member step.
func (e *quotaEntry) lease(run string, step int) float64 {
	l := e.Leases[run]
	if step != 0 {
		return l.Members[step]
	}
	return l.total()
}

// add adds tokens to run's lease (step 0) or to its group member step's,
// held until until; a lease left with nothing is dropped.
func (e *quotaEntry) add(run string, step int, tokens float64, until time.Time) {
	if e.Leases == nil {
		e.Leases = map[string]quotaLease{}
	}
	l := e.Leases[run]
	l.Until = until
	if step == 0 {
		l.Tokens += tokens
	} else {
		if l.Members == nil {
			l.Members = map[int]float64{}
		}
		if l.Members[step] += tokens; l.Members[step] <= 0 {
			delete(l.Members, step)
		}
	}
	if l.total() <= 0 {
		delete(e.Leases, run)
		return
	}
	e.Leases[run] = l
}

// chunkOf is what a lease of quotas takes at a time: the least chunk of
// any of them.
func chunkOf(quotas []orch.Quota) float64 {
	chunk := math.Inf(1)
	for _, q := range quotas {
		chunk = min(chunk, QuotaChunk(q))
	}
	return chunk
}

// QuotaChunk is what a lease takes of quota q at a time: a thirty-second
// of its allowance, at least 2,048 tokens (or the whole allowance when it
// is smaller).
func QuotaChunk(q orch.Quota) float64 {
	return math.Ceil(max(q.Tokens/32, min(q.Tokens, 2048)))
}

// quotaTokens is what a draw takes from the token quotas.
func quotaTokens(v orch.Vector) float64 {
	return v[orch.DimInputTokens] + v[orch.DimOutputTokens]
}

// QuotaKey is the ledger key of quota q of tenant for a draw at t (UTC
// calendar periods).
func QuotaKey(tenant string, q orch.Quota, t time.Time) string {
	t = t.UTC()
	key := tenant + "." + q.Scope + "." + q.Subject + "." + q.Period
	switch q.Period {
	case orch.PeriodDay:
		key += "." + t.Format("20060102")
	case orch.PeriodMonth:
		key += "." + t.Format("200601")
	}
	return key
}

func periodName(p string) string {
	switch p {
	case orch.PeriodDay:
		return "daily"
	case orch.PeriodMonth:
		return "monthly"
	}
	return "total"
}

// quotas reports whether rb's draws go through its quotas.
func (b *Budgets) quotas(rb RunBudget) bool {
	return b != nil && b.Quotas != nil && len(rb.Quotas) > 0
}

// leaseAt is when the run's lease was taken, which names the periods its
// draws are charged to; a run with no lease yet takes it now.
func (b *Budgets) leaseAt(rb RunBudget) time.Time {
	if rb.Lease != nil && !rb.Lease.At.IsZero() {
		return rb.Lease.At
	}
	return b.now()
}

// OpenLease takes the run's lease of its quotas before its first model
// call: a chunk of each (no more than the run's own token limits, no more
// than a quota has left). A quota with nothing left refuses the run
// (*Exhausted). Taken again for the same run (a redelivered hop), it
// returns the lease the run holds. Nil when no quota applies.
func (b *Budgets) OpenLease(ctx context.Context, rb RunBudget) (*orch.QuotaLease, error) {
	if !b.quotas(rb) {
		return nil, nil
	}
	at := b.leaseAt(rb)
	want := chunkOf(rb.Quotas)
	if lim, ok := tokenLimit(rb.Limits); ok {
		want = max(1, min(want, lim))
	}
	got, err := b.raise(ctx, rb, at, 0, func(cur float64) (float64, float64) {
		if cur > 0 {
			return 0, 0 // taken already
		}
		return 1, want
	})
	if err != nil {
		return nil, err
	}
	lease := &orch.QuotaLease{Tokens: got, At: at}
	for _, q := range rb.Quotas {
		lease.Keys = append(lease.Keys, QuotaKey(rb.Tenant, q, at))
	}
	return lease, nil
}

// tokenLimit is the most tokens the run's own limits let it use.
func tokenLimit(limits orch.Vector) (float64, bool) {
	in, okIn := limits[orch.DimInputTokens]
	out, okOut := limits[orch.DimOutputTokens]
	return in + out, okIn && okOut
}

// raise moves the run's lease in the entry of each of its quotas: target
// says, from the lease cur an entry holds for the run, the least lease the
// run needs and the lease it wants. An entry that holds the least already
// is left as it is; otherwise it gives the least and, of what is wanted
// beyond, no more than a quarter of what it has left; one that cannot give
// the least refuses (*Exhausted; what earlier entries gave is
// taken back). The lease is the run's (step 0) or its group member
// step's. It returns the smallest lease the entries now hold.
func (b *Budgets) raise(ctx context.Context, rb RunBudget, at time.Time, step int, target func(cur float64) (least, want float64)) (float64, error) {
	now := b.now()
	until := rb.Deadline
	if until.IsZero() {
		until = now.Add(orch.DefaultRunTimeout)
	}
	until = until.Add(leaseGrace)
	type undo struct {
		key    string
		tokens float64
	}
	var done []undo
	lease := math.Inf(1)
	var err error
	for _, q := range rb.Quotas {
		key := QuotaKey(rb.Tenant, q, at)
		var hit *Exhausted
		var cur, after float64
		_, err = kvcas.Update(ctx, b.Quotas, key, func(e *quotaEntry, _ uint64) (bool, error) {
			hit = nil
			n := len(e.Leases)
			held := e.held(now)
			cur = e.lease(rb.RunID, step)
			after = cur
			least, want := target(cur)
			if cur >= least {
				return len(e.Leases) != n, nil // charging given-up leases is written
			}
			left := q.Tokens - e.Used - held // what nobody holds
			if left < least-cur {
				hit = &Exhausted{Dim: DimQuotaTokens, Limit: q.Tokens, Used: q.Tokens - max(0, left), Want: least - cur,
					Quota: &QuotaHit{Quota: q, Key: key}, leased: cur}
				return false, nil
			}
			// The least, and of what it wants beyond, no more than a
			// quarter of what is left: leases shrink as a quota fills,
			// so what running runs hold but have not used blocks little.
			after = least + min(max(0, want-least), math.Floor((left-(least-cur))/4))
			e.add(rb.RunID, step, after-cur, until)
			return true, nil
		})
		if err == nil && hit != nil {
			err = hit
		}
		if err != nil {
			break
		}
		if after > cur {
			done = append(done, undo{key, after - cur})
		}
		lease = min(lease, after)
	}
	if err != nil {
		// Take back what this raise took from the quotas before.
		for _, u := range done {
			_, back := kvcas.Update(context.WithoutCancel(ctx), b.Quotas, u.key, func(e *quotaEntry, _ uint64) (bool, error) {
				l, ok := e.Leases[rb.RunID]
				if !ok {
					return false, nil
				}
				e.add(rb.RunID, step, -u.tokens, l.Until)
				return true, nil
			})
			err = errors.Join(err, back)
		}
		return 0, err
	}
	return lease, nil
}

// drawLease checks a draw of tokens against what the hop may use of the
// run's lease, raising the lease when it would pass it; with l.mu held and
// l.used not yet moved by the draw.
func (b *Budgets) drawLease(ctx context.Context, rb RunBudget, tokens float64) error {
	l := rb.l
	if tokens <= 0 {
		return nil
	}
	used := quotaTokens(l.used)
	if ln := l.lane; ln != nil {
		used -= quotaTokens(ln.base) // a member counts its own draws against its share
	}
	need := used + tokens - l.quotaCap
	if need <= 1e-9 {
		return nil
	}
	at, chunk := b.leaseAt(rb), chunkOf(rb.Quotas)
	var err error
	var lease float64
	if ln := l.lane; ln != nil {
		// A member's share of the run's lease was set at fan-out; past it
		// it holds a lease of its own (its siblings' draws are not in its
		// view), raised like the run's and settled with it.
		least := used + tokens - l.quotaShare
		if lease, err = b.raise(ctx, rb, at, ln.step, func(float64) (float64, float64) { return least, least + chunk }); err == nil {
			l.quotaCap = l.quotaShare + lease
		}
	} else {
		// A sequential hop knows what the run used: the run's lease must
		// hold that and this draw. An earlier hop may have raised it.
		total := used + tokens
		if lease, err = b.raise(ctx, rb, at, 0, func(float64) (float64, float64) { return total, total + chunk }); err == nil {
			l.quotaCap = lease
		}
	}
	var ex *Exhausted
	if errors.As(err, &ex) {
		// What this call may still take: what the hop holds (its lease,
		// which another hop may have raised, past a member's share) and
		// what the quota has left.
		held := max(l.quotaCap, l.quotaShare+ex.leased)
		forCall := max(0, held-used) + ex.Limit - ex.Used
		ex.Used = ex.Limit - forCall
	}
	return err
}

// SettleLease ends the run's lease: each quota it was taken from (its
// keys, and the entries of the run's quotas in the lease's periods) is
// charged what the run used and no longer holds the lease. Settling a
// lease again (a redelivered hop) changes nothing. It reports whether a
// lease was settled.
func (b *Budgets) SettleLease(ctx context.Context, s orch.RunState) (bool, error) {
	lease := s.Budget.Lease
	if b == nil || b.Quotas == nil || lease == nil {
		return false, nil
	}
	keys := slices.Clone(lease.Keys)
	for _, q := range s.Budget.Quotas {
		if k := QuotaKey(s.Request.TenantID, q, lease.At); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	used := quotaTokens(s.Known())
	now := b.now()
	settled := false
	var errs []error
	for _, key := range keys {
		_, err := kvcas.Update(ctx, b.Quotas, key, func(e *quotaEntry, _ uint64) (bool, error) {
			e.held(now)
			if _, ok := e.Leases[s.Request.RunID]; !ok {
				return false, nil
			}
			delete(e.Leases, s.Request.RunID) // the run's, with its group members'
			e.Used += used
			settled = true
			return true, nil
		})
		errs = append(errs, err)
	}
	return settled, errors.Join(errs...)
}

// QuotaUsed reads quota q of tenant in the period of t: the tokens ended
// runs used, and what running runs hold.
func (b *Budgets) QuotaUsed(ctx context.Context, tenant string, q orch.Quota, t time.Time) (used, held float64, err error) {
	e, err := kvcas.Get[quotaEntry](ctx, b.Quotas, QuotaKey(tenant, q, t))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range e.Value.Leases {
		held += l.total()
	}
	return e.Value.Used, held, nil
}
