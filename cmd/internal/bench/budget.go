package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
)

// BudgetDraw is what enforcing the budget costs one call: the reservation
// before it and the settlement after it, each a compare-and-swap on the
// run's ledger entry over TCP. Warm is the common case (the process drew
// from the run last, so its cached revision is current: one round trip
// each); Cold is a process that never drew from the run (a read first).
type BudgetDraw struct {
	Warm Dist `json:"warm"`
	Cold Dist `json:"cold"`
	// RatioToHop is the warm p50 over the agentbus hop p50 (TCP).
	RatioToHop float64 `json:"warm_p50_over_hop_p50"`
}

// budgetDraw measures n reservations with their settlements as a model
// call makes them: one model call, its input and output tokens and cost
// reserved, then settled with smaller actual figures. Each run draws 20
// times, as a 5-step run does.
func budgetDraw(ctx context.Context, srv *benchServer, n int) (BudgetDraw, error) {
	nc, js, err := srv.connect(true)
	if err != nil {
		return BudgetDraw{}, err
	}
	defer nc.Close()
	if err := events.Bootstrap(ctx, js, app.Topology(events.Topology{})); err != nil {
		return BudgetDraw{}, err
	}
	kv, err := js.KeyValue(ctx, handlers.BucketBudgets)
	if err != nil {
		return BudgetDraw{}, err
	}
	want := orch.Vector{orch.DimModelCalls: 1, orch.DimInputTokens: 900, orch.DimOutputTokens: 4096, orch.DimCostUSD: 0.043}
	actual := orch.Vector{orch.DimModelCalls: 1, orch.DimInputTokens: 900, orch.DimOutputTokens: 120, orch.DimCostUSD: 0.0035}
	limits := orch.DefaultLimits
	warm := &handlers.Budgets{KV: kv}
	var warmLat, coldLat []time.Duration
	for i := range n {
		rb := handlers.RunBudget{Tenant: "bench", RunID: fmt.Sprintf("budget-%d", i/20), Limits: limits}
		b := warm
		if i%20 == 0 {
			b = &handlers.Budgets{KV: kv} // a process that has not drawn from this run
		}
		start := time.Now()
		if err := b.Reserve(ctx, rb, want); err != nil {
			return BudgetDraw{}, err
		}
		if err := b.Settle(ctx, rb, want, actual); err != nil {
			return BudgetDraw{}, err
		}
		if b == warm {
			warmLat = append(warmLat, time.Since(start))
		} else {
			coldLat = append(coldLat, time.Since(start))
		}
	}
	return BudgetDraw{Warm: distOf(warmLat), Cold: distOf(coldLat)}, nil
}
