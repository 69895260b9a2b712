package handlers

import (
	"context"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
)

// ExtBudgetMark is the CloudEvents extension in which a hop's
// orchestration outputs carry the run's budget ledger entry as the hop's
// process last saw it: its revision and counters (LedgerMark). The next
// hop, on any process, then draws with one compare-and-set at that
// revision rather than a read and a compare-and-set. The mark is a hint:
// a stale one (another lane drew since) fails its compare-and-set and the
// draw reads the entry, as without a mark; a mark is never the budget
// itself, which stays the ledger's.
const ExtBudgetMark = "budgetmark"

// LedgerMark is a run's ledger entry at a revision.
type LedgerMark struct {
	Rev  uint64      `json:"rev"`
	Used orch.Vector `json:"used,omitempty"`
}

// Marks is the middleware of a role that draws from b: it takes the mark
// of its input (ExtBudgetMark) into b's cache when it is newer than what
// b holds for the run, and marks the handler's orchestration outputs of
// the same run with the entry as b holds it afterwards.
func (b *Budgets) Marks(next events.Handler) events.Handler {
	return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		if b == nil || b.KV == nil {
			return next(ctx, ev)
		}
		tenant, run := events.Ext(ev, events.ExtTenant), events.Ext(ev, events.ExtRun)
		if run == "" {
			return next(ctx, ev)
		}
		key := budgetKey(tenant, run)
		if m := events.Ext(ev, ExtBudgetMark); m != "" {
			var mark LedgerMark
			if json.Unmarshal([]byte(m), &mark) == nil && mark.Rev > 0 {
				b.seed(key, mark)
			}
		}
		outs, err := next(ctx, ev)
		if err != nil {
			return outs, err
		}
		entry, rev, ok := b.cached(key)
		if !ok {
			return outs, nil
		}
		raw, merr := json.Marshal(LedgerMark{Rev: rev, Used: entry.Used})
		if merr != nil {
			return outs, nil // a hint only
		}
		for i := range outs {
			if !events.IsAuditType(outs[i].Type()) && events.Ext(outs[i], events.ExtRun) == run {
				events.SetExt(&outs[i], ExtBudgetMark, string(raw))
			}
		}
		return outs, nil
	}
}

// seed takes mark as the run's cached entry unless the cache holds the
// same revision or a later one.
func (b *Budgets) seed(key string, mark LedgerMark) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.last[key]; ok && c.rev >= mark.Rev {
		return
	}
	b.rememberLocked(key, BudgetEntry{Used: mark.Used}, mark.Rev)
}
