package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/orch"
)

// BudgetDraw is what enforcing the budget costs one call: the reservation
// before it and the settlement after it. Warm is the common case, a hop
// drawing from the ledger its run state carries (in memory); Cold is a
// member of a parallel group past its share, which tops up from its
// group's pool by a compare-and-swap over TCP.
type BudgetDraw struct {
	Warm Dist `json:"warm"`
	Cold Dist `json:"cold"`
	// RatioToHop is the warm p50 over the agentbus hop p50 (TCP).
	RatioToHop float64 `json:"warm_p50_over_hop_p50"`
}

// budgetDraw measures n reservations with their settlements as a model
// call makes them: one model call, its input and output tokens and cost
// reserved, then settled with smaller actual figures. Each run draws 20
// times, as a 5-step run does; the cold draws are a lane's whose share is
// spent.
func budgetDraw(ctx context.Context, srv *benchServer, n int) (BudgetDraw, error) {
	nc, js, err := srv.connect(true)
	if err != nil {
		return BudgetDraw{}, err
	}
	defer nc.Close()
	if err := events.Bootstrap(ctx, js, app.Topology(events.Topology{})); err != nil {
		return BudgetDraw{}, err
	}
	kv, err := js.KeyValue(ctx, ledger.BucketBudgets)
	if err != nil {
		return BudgetDraw{}, err
	}
	want := orch.Vector{orch.DimModelCalls: 1, orch.DimInputTokens: 900, orch.DimOutputTokens: 4096, orch.DimCostUSD: 0.043}
	actual := orch.Vector{orch.DimModelCalls: 1, orch.DimInputTokens: 900, orch.DimOutputTokens: 120, orch.DimCostUSD: 0.0035}
	b := &ledger.Budgets{KV: kv}
	var warmLat, coldLat []time.Duration
	var rb ledger.RunBudget
	for i := range n {
		if i%20 == 0 {
			rb = ledger.NewRunBudget("bench", fmt.Sprintf("budget-%d", i/20), orch.DefaultLimits, time.Time{}, nil)
		}
		start := time.Now()
		if err := b.Reserve(ctx, rb, want); err != nil {
			return BudgetDraw{}, err
		}
		if err := b.Settle(ctx, rb, want, actual); err != nil {
			return BudgetDraw{}, err
		}
		warmLat = append(warmLat, time.Since(start))
	}
	for i := range max(n/20, 1) {
		// Two lanes of a run with one model call left: each lane's share
		// is none, so its call is drawn from the pool.
		var req orch.StepRequest
		req.Run.Request.TenantID, req.Run.Request.RunID = "bench", fmt.Sprintf("budget-lane-%d", i)
		req.Run.Budget.Limits = orch.Vector{orch.DimModelCalls: 1, orch.DimInputTokens: 1e6, orch.DimOutputTokens: 1e6, orch.DimCostUSD: 100}
		req.Group = orch.Group{ID: "grp-bench", Expected: 2}
		lane := ledger.StepBudget(req)
		start := time.Now()
		if err := b.Reserve(ctx, lane, want); err != nil {
			return BudgetDraw{}, err
		}
		if err := b.Settle(ctx, lane, want, actual); err != nil {
			return BudgetDraw{}, err
		}
		coldLat = append(coldLat, time.Since(start))
	}
	return BudgetDraw{Warm: distOf(warmLat), Cold: distOf(coldLat)}, nil
}
