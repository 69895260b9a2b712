package router

import (
	"context"
	"errors"
	"strings"

	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// summarise writes, with the router's model, the summary of the turns the
// end of a run of an agent folds out of its history window (seed 002:
// with a real model the summary is written by the model). It is asked at
// the session update, the one place that holds the whole turns leaving
// the window, once per fold: one recorded model call (summarize@v1),
// drawn from the run's budget and bounded by the window's max_tokens,
// recorded in the run's trace before run.finished (endCalls). The session
// keeps the summary, and every later run sees it as recorded history
// (context.loaded), so replay needs no model. Nothing is asked of the
// offline model, nor when nothing is folded; a call that fails or answers
// nothing leaves the extractive summary.
func (r *Router) summarise(ctx context.Context, d *orch.Decision, fresh bool) (*runctl.Summary, error) {
	req, c := d.State.Request, d.Session
	if fresh || c == nil || c.Window == nil || llm.IsOffline(r.Model) {
		return nil, nil
	}
	sess, _, err := r.Sessions.Get(ctx, req.TenantID, req.SessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	in, covers := runctl.Folding(sess, req, d.Ended.Response, *c.Window)
	if len(covers) == 0 {
		return nil, nil
	}
	rec := llm.Record(r.Model).KeepPayloads(r.Records.Keeps(req.TenantID))
	mreq := llm.NewRequest(llm.TaskSummarize, in)
	mreq.MaxTokens = (in.MaxBytes + 3) / 4
	resp, err := handlers.AgentModel(r.Budgets.Model(rec, ledger.BudgetOf(d.State)), d.State.Agent).Complete(ctx, mreq)
	endCalls(d, rec.Calls())
	text := strings.TrimSpace(resp.Message.Content)
	if err != nil || text == "" {
		r.Log.Warn().Err(err).Str("run_id", req.RunID).Str("session_id", req.SessionID).
			Msg("the session's summary was not written by the model; it keeps the extractive one")
		return nil, nil
	}
	return &runctl.Summary{Text: text, Covers: covers}, nil
}

// endCalls records model calls the router made after the decider ended
// the run as the decider records every other: model.called in the
// trace, before run.finished, and their usage in the run's (its state,
// its result and the run.finished payload the execution record reads).
func endCalls(d *orch.Decision, calls []llm.Call) {
	var u llm.Usage
	for _, c := range calls {
		beforeEnd(d, orch.Audit{Name: "model.called", Payload: c})
		u = u.Add(c.Usage())
	}
	if u == (llm.Usage{}) {
		return
	}
	d.State.Usage = d.State.Usage.Add(u)
	d.Ended.Usage = d.State.Usage
	for i, e := range d.Emits {
		if res, ok := e.Data.(orch.RunResult); ok {
			res.Usage = d.State.Usage
			d.Emits[i].Data = res
		}
	}
	if fin := finishedPayload(d); fin != nil {
		fin["usage"] = d.State.Usage
	}
}

// finishedPayload is the payload of the decision's run.finished audit
// event, nil if it has none.
func finishedPayload(d *orch.Decision) map[string]any {
	for _, a := range d.Audits {
		if fin, ok := a.Payload.(map[string]any); ok && a.Name == "run.finished" {
			return fin
		}
	}
	return nil
}

// markPayloadRecords says, in the run.finished payload of a run whose
// tenant keeps payload records (payload_records), that its execution
// record keeps them: the projector takes them from the run's trace.
func (r *Router) markPayloadRecords(d *orch.Decision) {
	if d.Ended == nil || !r.Records.Keeps(d.State.Request.TenantID) {
		return
	}
	if fin := finishedPayload(d); fin != nil {
		fin["payload_records"] = true
	}
}
