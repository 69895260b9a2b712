package ledger

import (
	"context"
	"errors"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// Model returns m drawing from the run's budget: before each call it
// reserves one model call, the call's estimated input tokens, the output
// tokens it may produce (the model's maximum output, or what the budget has
// left when that is less) and their cost at the model's price, plus one
// retry for a repair; a call that does not fit is not made (*Exhausted).
// The reservation is drawn from the run's token quotas too; when a quota
// or the run's output tokens leave less output than the maximum, the call
// is made with max_tokens capped at what is left.
// The call's max_tokens is what the budget had left, so no answer runs past
// it. After the call the reservation is settled with the call's reported
// usage. The call's context ends at the run's deadline. Without limits, m
// is returned as it is.
func (b *Budgets) Model(m llm.Model, rb RunBudget) llm.Model { return b.ReportingModel(m, rb, nil) }

// ReportingModel is Model that hands spent, after each call, what the
// call drew besides its model usage (the retry of a repair), for the hop
// to report with its result: usage is reported by the calls' records.
func (b *Budgets) ReportingModel(m llm.Model, rb RunBudget, spent func(orch.Vector)) llm.Model {
	if b == nil || rb.l == nil || len(rb.Limits) == 0 {
		return m
	}
	return budgetedModel{model: m, ledger: b, run: rb, spent: spent}
}

type budgetedModel struct {
	model  llm.Model
	ledger *Budgets
	run    RunBudget
	spent  func(orch.Vector)
}

// Complete reserves, calls and settles.
func (m budgetedModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	price, _ := llm.PriceOf(m.model)
	in := llm.EstimateInputTokens(req)
	out := llm.CapTokens(llm.MaxOutputOf(m.model), req.MaxTokens)
	want := func(out int) orch.Vector {
		v := orch.Vector{orch.DimModelCalls: 1, orch.DimInputTokens: float64(in), orch.DimOutputTokens: float64(out),
			orch.DimCostUSD: (float64(in)*price.Input + float64(out)*price.Output) / 1e6}
		if req.Repair {
			v[orch.DimRetries] = 1
		}
		return v
	}
	reserved := want(out)
	used, err := m.ledger.Draw(ctx, m.run, reserved)
	capped := false
	for range len(m.run.Quotas) + 1 {
		// Less output than the model's maximum is left (of the run's
		// output tokens, or of a token quota once the input is
		// counted): the call may still be made, capped at what remains.
		var ex *Exhausted
		if !errors.As(err, &ex) || ex.Dim != orch.DimOutputTokens && ex.Quota == nil {
			break
		}
		left := ex.Limit - ex.Used
		if ex.Quota != nil {
			left -= float64(in)
		}
		if left < 1 || int(left) >= out {
			break
		}
		out, capped = int(left), true
		reserved = want(out)
		used, err = m.ledger.Draw(ctx, m.run, reserved)
	}
	if err != nil {
		return llm.Response{}, err
	}
	if capped {
		req.MaxTokens = out
	}
	if lim, ok := m.run.Limits[orch.DimOutputTokens]; ok {
		// What was left before this call: its answer may not pass it.
		req.MaxTokens = llm.CapTokens(int(lim-used[orch.DimOutputTokens])+out, req.MaxTokens)
	}
	if !m.run.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, m.run.Deadline)
		defer cancel()
	}
	resp, err := m.model.Complete(ctx, req)
	extra := orch.Vector{}
	if r := reserved[orch.DimRetries]; r > 0 {
		extra[orch.DimRetries] = r
	}
	actual := orch.Vector{orch.DimModelCalls: 1}.Add(extra)
	if err == nil {
		actual = actual.Add(orch.UsageVector(resp.Usage.InputTokens, resp.Usage.OutputTokens, 0, resp.Usage.CostUSD))
	}
	_ = m.ledger.Settle(context.WithoutCancel(ctx), m.run, reserved, actual)
	if m.spent != nil && len(extra) > 0 {
		m.spent(extra)
	}
	return resp, err
}
