package router

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// A run that asks its user a question parks at a clarify gate (orch,
// clarify.go). The router marks its session as waiting for the answer;
// the session's next message, while the gate is open, is the answer: its
// request resolves the gate instead of starting a run, and its caller
// gets the answered run's result. An answered question of intent is
// routed again here, with the answer, before the decider resumes the run.

// admitted holds back a request that is not to start now (it reports
// true, with the hop's events): the answer to the question its session
// waits for, or a run queued behind its session's run in flight. Without
// a session queue, the session's record says whether it waits for an
// answer; with one, a run waiting at a gate is still its session's run
// in flight, so only a queued request can be an answer.
func (r *Router) admitted(ctx context.Context, ev event.Event, req orch.RunRequest) ([]event.Event, bool, error) {
	if r.SessionRuns == nil {
		return r.answer(ctx, ev, req)
	}
	return r.queue(ctx, ev, req)
}

// answer takes a run request that arrives while its session waits for
// the answer to another run's question: its message is the answer. It
// resolves that run's clarify gate with it (the gate's record keeps the
// answer and this request's id, so the answered run's results reach this
// request's caller too) and sends the resolution to the run
// (approval.decided, with the id the ingress would give it). It reports
// false, doing nothing, when the session waits for no answer or the gate
// was resolved otherwise: the request is then a run of its own.
func (r *Router) answer(ctx context.Context, ev event.Event, req orch.RunRequest) ([]event.Event, bool, error) {
	if r.Sessions == nil || r.Gates == nil || orch.ValidateRequest(req) != nil {
		return nil, false, nil
	}
	sess, _, err := r.Sessions.Get(ctx, req.TenantID, req.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	q := sess.Clarify
	if q == nil || q.RunID == req.RunID {
		return nil, false, nil
	}
	a := orch.ApprovalDecided{RunID: q.RunID, TenantID: req.TenantID, SessionID: req.SessionID, Gate: q.GateID,
		Decision: orch.GateApproved, By: req.UserID, Answer: req.Message, AnswerRun: req.RunID, At: r.at(ev)}
	rec, _, err := r.Gates.Resolve(ctx, req.TenantID, a)
	switch {
	case errors.Is(err, runctl.ErrGateNotFound) || errors.Is(err, runctl.ErrGateDecided) || errors.Is(err, runctl.ErrInvalidAnswer):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case rec.AnswerRun != req.RunID:
		return nil, false, nil // answered by another message first
	}
	r.Credentials.Forget(ctx, req.RunID, req) // no run of its own uses the caller's key
	r.Log.Info().Str("run_id", q.RunID).Str("gate_id", q.GateID).Str("answer_run_id", req.RunID).Msg("the session's message answers its run's question")
	a.Answer, a.At = rec.Answer, rec.DecidedAt
	decided, err := events.New(events.DeriveID(q.GateID, "decided/"+orch.GateApproved), events.TypeApprovalDecided,
		events.Meta{Tenant: req.TenantID, Session: req.SessionID, Run: q.RunID, SourceProcess: handlers.RoleRouter}, a)
	if err != nil {
		return nil, false, err
	}
	return []event.Event{decided}, true, nil
}

// clarified is the decider's input of a gate's resolution: as the record
// holds it and, for an answered question of intent, with the run routed
// again (the task with its clarifications). Any resolution of a clarify
// gate frees the run's session from waiting for the answer.
func (r *Router) clarified(ctx context.Context, rec runctl.GateRecord) (orch.GateResolved, error) {
	in := rec.Resolved()
	g := rec.Gate
	if g.Kind != orch.GateClarify {
		return in, nil
	}
	req := rec.State.Request
	if r.Sessions != nil {
		if err := r.Sessions.Answered(ctx, req.TenantID, req.SessionID, g.ID); err != nil {
			return in, err
		}
	}
	if rec.Status != orch.GateApproved || g.Replan != nil || g.Question == nil {
		return in, nil
	}
	st := rec.State
	st.Clarifications = append(slices.Clone(st.Clarifications), orch.Clarification{Question: g.Question.Text, Answer: rec.Answer})
	req.Message = st.Task()
	routed, err := r.route(ctx, req, rec.DecidedAt)
	if err != nil {
		return in, err
	}
	again, ok := routed.(orch.Requested)
	if !ok {
		return in, fmt.Errorf("handlers: route again: %T", routed)
	}
	in.Rerouted = &again
	return in, nil
}

// asking marks the session of a run the decision parked at a clarify gate
// as waiting for its answer, before the hop publishes, and records it in
// the trace.
func (r *Router) asking(ctx context.Context, d *orch.Decision) error {
	g := d.Opened
	if r.Sessions == nil || g.Kind != orch.GateClarify || orch.ValidateRequest(d.State.Request) != nil {
		return nil
	}
	up, err := r.Sessions.Asking(ctx, d.State.Request, *g, g.OpenedAt)
	if err != nil {
		return err
	}
	d.Audits = append(d.Audits, orch.Audit{Name: runctl.AuditSessionUpdated, Payload: up})
	return nil
}
