package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
)

// BucketQuotas holds the token quotas' ledgers: the tokens drawn from
// each quota in its current period, keyed
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

type quotaEntry struct {
	Used float64 `json:"used"`
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

// DrawQuotas moves the run's quota ledgers of the current periods by
// tokens. A positive draw with refuse set is refused (*Exhausted with its
// Quota, nothing drawn) when it would take any quota past its allowance;
// settlements (refuse unset, or tokens ≤ 0) are written whatever the
// counters say, never below zero. Each entry moves by compare-and-swap, so
// runs on any process draw from one count.
func (b *Budgets) DrawQuotas(ctx context.Context, rb RunBudget, tokens float64, refuse bool) error {
	if b == nil || b.Quotas == nil || len(rb.Quotas) == 0 || tokens == 0 {
		return nil
	}
	now := b.now()
	refuse = refuse && tokens > 0
	var done []string
	for _, q := range rb.Quotas {
		key := QuotaKey(rb.Tenant, q, now)
		var hit *Exhausted
		_, err := kvcas.Update(ctx, b.Quotas, key, func(e *quotaEntry, _ uint64) (bool, error) {
			hit = nil
			if refuse && e.Used+tokens > q.Tokens+1e-9 {
				hit = &Exhausted{Dim: DimQuotaTokens, Limit: q.Tokens, Used: e.Used, Want: tokens,
					Quota: &QuotaHit{Quota: q, Key: key}}
				return false, nil
			}
			e.Used = max(0, e.Used+tokens)
			return true, nil
		})
		if err == nil && hit != nil {
			err = hit
		}
		if err != nil {
			// Take back what this draw took from the quotas before.
			for _, k := range done {
				_, back := kvcas.Update(context.WithoutCancel(ctx), b.Quotas, k, func(e *quotaEntry, _ uint64) (bool, error) {
					e.Used = max(0, e.Used-tokens)
					return true, nil
				})
				err = errors.Join(err, back)
			}
			return err
		}
		done = append(done, key)
	}
	return nil
}

// QuotaUsed reads the tokens drawn from quota q of tenant in the period
// of t.
func (b *Budgets) QuotaUsed(ctx context.Context, tenant string, q orch.Quota, t time.Time) (float64, error) {
	var used float64
	_, err := kvcas.Update(ctx, b.Quotas, QuotaKey(tenant, q, t), func(e *quotaEntry, _ uint64) (bool, error) {
		used = e.Used
		return false, nil
	})
	return used, err
}
