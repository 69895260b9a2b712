package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/orch"
)

// countingKV counts every call a bucket is asked to make.
type countingKV struct {
	jetstream.KeyValue
	ops atomic.Int32
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.ops.Add(1)
	return c.KeyValue.Get(ctx, key)
}

func (c *countingKV) Create(ctx context.Context, key string, v []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	c.ops.Add(1)
	return c.KeyValue.Create(ctx, key, v, opts...)
}

func (c *countingKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	c.ops.Add(1)
	return c.KeyValue.Update(ctx, key, v, rev)
}

// stepRequestOf is a step request of run with its budget: limits, what
// the run had drawn when the step was dispatched, and its group's size.
func stepRequestOf(runID string, limits, known orch.Vector, members int) orch.StepRequest {
	var req orch.StepRequest
	req.Run.Request.TenantID, req.Run.Request.RunID = handlerstest.Tenant, runID
	req.Run.Budget.Limits, req.Run.Budget.Spent = limits, known
	req.Group = orch.Group{ID: "grp-" + runID, Expected: members}
	return req
}

// TestBudget_ASequentialHopDrawsFromItsStateWithoutARoundTrip: a step of
// a group of one draws from what its run state says is left, in memory:
// the bucket is never asked, the limit holds exactly, and a later turn
// carrying the step's spending draws on from there.
func TestBudget_ASequentialHopDrawsFromItsStateWithoutARoundTrip(t *testing.T) {
	env := handlerstest.NewEnv(t)
	kv := &countingKV{KeyValue: env.Budgets.KV}
	b := &ledger.Budgets{KV: kv}
	ctx := handlerstest.Ctx(t)
	one := orch.Vector{orch.DimToolCalls: 1}
	req := stepRequestOf("run-seq", orch.Vector{orch.DimToolCalls: 5}, orch.Vector{orch.DimToolCalls: 2}, 1)
	rb := ledger.StepBudget(req)
	for i := range 2 {
		if err := b.Reserve(ctx, rb, one); err != nil {
			t.Fatalf("draw %d: %v", i+1, err)
		}
	}
	// The next turn: the run had 2, this step's turns drew 2.
	req.Spent = orch.Vector{orch.DimToolCalls: 2}
	next := ledger.StepBudget(req)
	if err := b.Reserve(ctx, next, one); err != nil {
		t.Fatalf("the fifth call: %v", err)
	}
	var ex *ledger.Exhausted
	if err := b.Reserve(ctx, next, one); !errors.As(err, &ex) || ex.Dim != orch.DimToolCalls || ex.Used != 5 || ex.Group {
		t.Fatalf("the sixth call: %v, want refused at 5 of 5", err)
	}
	if n := kv.ops.Load(); n != 0 {
		t.Errorf("the bucket was asked %d times, want never", n)
	}
	if used := next.Used()[orch.DimToolCalls]; used != 5 {
		t.Errorf("the hop's ledger holds %g tool calls, want 5", used)
	}
}

// TestBudget_LanesDrawTheirSharesThenTheGroupsPool: four lanes of a run
// with 20 tool calls left each get a share of 2 (half of what is left,
// split four ways) and share a pool of 12. A lane draws its share without
// asking the bucket, then tops up from the pool by compare-and-set;
// racing lanes never take the run past its limit, and a lane whose turn
// carries what it already took from the pool does not take it twice.
func TestBudget_LanesDrawTheirSharesThenTheGroupsPool(t *testing.T) {
	env := handlerstest.NewEnv(t)
	kv := &countingKV{KeyValue: env.Budgets.KV}
	b := &ledger.Budgets{KV: kv}
	ctx := handlerstest.Ctx(t)
	one := orch.Vector{orch.DimToolCalls: 1}
	req := stepRequestOf("run-lanes", orch.Vector{orch.DimToolCalls: 30}, orch.Vector{orch.DimToolCalls: 10}, 4)
	share, pool := orch.LaneShare(req.Run.Remaining(), 4)
	if share[orch.DimToolCalls] != 2 || pool[orch.DimToolCalls] != 12 {
		t.Fatalf("share %v and pool %v of 20 among 4, want 2 and 12", share, pool)
	}
	first := ledger.StepBudget(req)
	for range 2 {
		if err := b.Reserve(ctx, first, one); err != nil {
			t.Fatal(err)
		}
	}
	if n := kv.ops.Load(); n != 0 {
		t.Fatalf("a lane within its share asked the bucket %d times", n)
	}
	if err := b.Reserve(ctx, first, one); err != nil {
		t.Fatalf("a draw past the share: %v", err)
	}
	if kv.ops.Load() == 0 || first.Pooled()[orch.DimToolCalls] != 1 {
		t.Fatalf("a draw past the share: pooled %v after %d bucket calls, want 1 from the pool", first.Pooled(), kv.ops.Load())
	}
	// The lane's next turn carries its spending and its pool draw: its
	// next call comes from the pool again, one more.
	req.Spent, req.Pooled = orch.Vector{orch.DimToolCalls: 3}, first.Pooled()
	if err := b.Reserve(ctx, ledger.StepBudget(req), one); err != nil {
		t.Fatal(err)
	}
	// Three other lanes race for what is left: their shares (6) and the
	// pool's 10.
	req.Spent, req.Pooled = nil, nil
	var drawn atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			lane := ledger.StepBudget(req)
			for b.Reserve(ctx, lane, one) == nil {
				drawn.Add(1)
			}
		})
	}
	wg.Wait()
	if got := drawn.Load(); got != 16 {
		t.Fatalf("the other lanes drew %d calls, want the 16 left (shares 6, pool 10)", got)
	}
	var ex *ledger.Exhausted
	lane := ledger.StepBudget(req)
	for range 2 {
		_ = b.Reserve(ctx, lane, one) // its share
	}
	if err := b.Reserve(ctx, lane, one); !errors.As(err, &ex) || !ex.Group || ex.Dim != orch.DimToolCalls {
		t.Fatalf("a draw past an empty pool: %v, want refused as the lane's", err)
	}
	// A dimension the run has no limit in is drawn freely, pool or none.
	for _, bs := range []*ledger.Budgets{b, {}} {
		if err := bs.Reserve(ctx, ledger.StepBudget(req), orch.Vector{orch.DimModelCalls: 50}); err != nil {
			t.Fatalf("a draw of a dimension with no limit: %v", err)
		}
	}
}

// TestBudget_LaneShareSplitsWhatIsLeftExactly: shares and pool add up to
// what is left in every dimension, whole units for counts, and a scarce
// dimension goes to the pool whole.
func TestBudget_LaneShareSplitsWhatIsLeftExactly(t *testing.T) {
	left := orch.Vector{orch.DimToolCalls: 7, orch.DimSideEffects: 1, orch.DimCostUSD: 0.9}
	share, pool := orch.LaneShare(left, 3)
	for d, r := range left {
		if got := share[d]*3 + pool[d]; got < r-1e-9 || got > r+1e-9 {
			t.Errorf("%s: 3 shares of %g and a pool of %g make %g, want %g", d, share[d], pool[d], got, r)
		}
	}
	if share[orch.DimToolCalls] != 1 || share[orch.DimSideEffects] != 0 || pool[orch.DimSideEffects] != 1 {
		t.Errorf("shares %v, pool %v", share, pool)
	}
	if s, p := orch.LaneShare(left, 1); s[orch.DimToolCalls] != 7 || len(p) != 0 {
		t.Errorf("a group of one: share %v, pool %v, want everything as its share", s, p)
	}
}
