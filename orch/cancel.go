package orch

import "time"

// Cancelled: the run was cancelled (POST /agent/runs/{run_id}/cancel, or
// a key written to the cancels bucket) and one of its inputs arrived. The
// run ends USER_CANCEL instead of taking that input's next hop: what the
// input reports (a joined group's results, the planner's steps and usage)
// is recorded first, and nothing more is dispatched. Input is the
// Requested, Planned or Joined input that arrived (a Requested with its
// request only: no model was asked); By and RequestedAt say who cancelled
// and when, and go into the trace (run.cancelled).
type Cancelled struct {
	Input       Input
	By          string
	RequestedAt time.Time
	// Timeout says the run was stopped at its wall-clock deadline: it
	// ends TIMEOUT rather than USER_CANCEL.
	Timeout bool
	At      time.Time
}

// cancelled records what the input that arrived reports, without acting
// on it, and ends the run USER_CANCEL.
func (d *decision) cancelled(in Cancelled) {
	switch of := in.Input.(type) {
	case Requested:
		d.received(of.Request)
	case Planned:
		p := of.Proposal
		d.State.Usage = d.State.Usage.Add(p.Usage)
		if p.Code == "" && p.Infeasible == "" {
			d.State.Plan.Steps = mergeSteps(d.State.Plan.Steps, p.Steps)
			d.State.Seq++
		}
	case Joined:
		d.State.Seq++
		d.record(of.Results)
	}
	if in.Timeout {
		d.audit("run.timed_out", "", map[string]any{"deadline": d.State.Deadline})
		d.finish(CodeTimeout, "the run did not finish before its deadline", map[string]any{"deadline": d.State.Deadline})
		return
	}
	reason, detail := "cancelled", map[string]any{}
	if in.By != "" {
		reason += " by " + in.By
		detail["cancelled_by"] = in.By
	}
	if !in.RequestedAt.IsZero() {
		detail["requested_at"] = in.RequestedAt.UTC()
	}
	d.cancel(reason, detail)
}

// cancel ends a cancelled run: USER_CANCEL, its cancellation recorded in
// the trace (run.cancelled) and the result's detail.
func (d *decision) cancel(reason string, detail map[string]any) {
	if detail == nil {
		detail = map[string]any{}
	}
	detail["reason"] = reason
	d.audit("run.cancelled", "", detail)
	d.State.Plan.Status = PlanFailed
	d.end(CodeUserCancel, "The task was cancelled: "+reason, reason, detail)
}
