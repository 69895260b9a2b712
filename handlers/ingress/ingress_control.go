package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
)

// Run control (seed 004): cancel, approvals, interrupt and resume, steer.
// Every route is scoped to the caller's tenant: another tenant's run is
// not found, exactly as a missing one. The caller is who the credential
// names (else X-User-Id): an approval records it as the approver.

// runTarget is the run a control request names, of the caller's tenant.
type runTarget struct {
	tenant, runID, by string
	plan              store.Plan
}

// target resolves the run of a control request, answering the request
// itself when it cannot.
func (g *Ingress) target(w http.ResponseWriter, r *http.Request) (runTarget, bool) {
	return g.targetOf(w, r, false)
}

// targetOf is target; with queued, a run that waits behind another run of
// its session (its run.queued is in its trace, and it has no plan yet) is
// found too.
func (g *Ingress) targetOf(w http.ResponseWriter, r *http.Request, queued bool) (runTarget, bool) {
	tenant, ok := readScope(w, r)
	if !ok {
		return runTarget{}, false
	}
	by := callerOf(r.Context()).UserID
	if by == "" {
		by = r.Header.Get("X-User-Id")
	}
	if len(by) > 128 {
		WriteError(w, http.StatusBadRequest, "invalid_request", "X-User-Id is longer than 128 characters")
		return runTarget{}, false
	}
	runID := r.PathValue("run_id")
	if orch.ValidateID("run_id", runID) != nil {
		WriteError(w, http.StatusNotFound, "not_found", "run not found")
		return runTarget{}, false
	}
	p, err := g.runPlan(r.Context(), tenant, runID)
	if errors.Is(err, store.ErrNotFound) && queued {
		p, err = g.queuedRun(r.Context(), tenant, runID)
	}
	if g.storeError(w, err, "run") {
		return runTarget{}, false
	}
	return runTarget{tenant: tenant, runID: runID, by: by, plan: p}, true
}

// runPlan is the plan projection of tenant's run runID. The projection
// trails the run by the projector's lag: a run parked at a gate is known
// by its gate before it is projected.
func (g *Ingress) runPlan(ctx context.Context, tenant, runID string) (store.Plan, error) {
	p, _, err := g.store.GetPlan(ctx, tenant, orch.PlanID(runID))
	if errors.Is(err, store.ErrNotFound) {
		return g.gatedRun(ctx, tenant, runID)
	}
	return p, err
}

// gatedRun is tenant's run runID as its newest gate holds it (the run's
// state when it parked), or store.ErrNotFound when it has no gate.
func (g *Ingress) gatedRun(ctx context.Context, tenant, runID string) (store.Plan, error) {
	if g.cfg.Gates == nil {
		return store.Plan{}, store.ErrNotFound
	}
	recs, err := g.cfg.Gates.List(ctx, tenant, runID)
	if err != nil {
		return store.Plan{}, err
	}
	var newest *runctl.GateRecord
	for i := range recs {
		if newest == nil || recs[i].State.Seq > newest.State.Seq {
			newest = &recs[i]
		}
	}
	if newest == nil || newest.State.Request.TenantID != tenant {
		return store.Plan{}, store.ErrNotFound
	}
	return handlers.Projection(newest.State), nil
}

// queuedRun is the plan-to-be of tenant's run runID while it is queued:
// its trace holds run.queued and nothing else has made it a plan yet.
func (g *Ingress) queuedRun(ctx context.Context, tenant, runID string) (store.Plan, error) {
	evs, err := g.store.Trace(ctx, store.TraceQuery{TenantID: tenant, PlanID: orch.PlanID(runID)})
	if err != nil {
		return store.Plan{}, err
	}
	i := slices.IndexFunc(evs, func(ev store.Event) bool { return ev.EventType == handlers.AuditRunQueued })
	if i < 0 {
		return store.Plan{}, store.ErrNotFound
	}
	return store.Plan{PlanID: orch.PlanID(runID), TenantID: tenant, SessionID: evs[i].SessionID, Status: store.PlanStatusPending}, nil
}

// running answers 409 run_finished for a finished run.
func running(w http.ResponseWriter, t runTarget) bool {
	if store.PlanFinished(t.plan.Status) {
		WriteError(w, http.StatusConflict, "run_finished", "the run has already finished ("+t.plan.Status+")")
		return false
	}
	return true
}

func (g *Ingress) controls(w http.ResponseWriter) bool {
	if g.cfg.Cancels == nil || g.cfg.Gates == nil {
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "run control is not configured")
		return false
	}
	return true
}

// approvals serves GET /agent/runs/{run_id}/approvals: the run's gates,
// oldest first, each with its packet and resolution.
func (g *Ingress) approvals(w http.ResponseWriter, r *http.Request) {
	t, ok := g.target(w, r)
	if !ok || !g.controls(w) {
		return
	}
	recs, err := g.cfg.Gates.List(r.Context(), t.tenant, t.runID)
	if err != nil {
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("list gates")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the gates could not be read")
		return
	}
	views := make([]runctl.GateView, len(recs))
	for i, rec := range recs {
		views[i] = rec.View()
	}
	WriteJSON(w, http.StatusOK, map[string]any{"run_id": t.runID, "status": t.plan.Status, "gates": views})
}

// decisions maps the words of an approval request to a gate resolution.
var decisions = map[string]string{
	"approve": orch.GateApproved, "approved": orch.GateApproved,
	"deny": orch.GateRejected, "reject": orch.GateRejected, "rejected": orch.GateRejected,
}

// approve serves POST /agent/runs/{run_id}/approvals/{gate_id}: approve
// or deny an open gate. The approver (the caller) is required and
// recorded. 202 with the decision; 409 gate_decided for a gate already
// decided otherwise (deciding the same again is answered 202 again).
func (g *Ingress) approve(w http.ResponseWriter, r *http.Request) {
	t, ok := g.target(w, r)
	if !ok || !g.controls(w) {
		return
	}
	var body runclient.ApprovalRequest
	if !g.decodeBody(w, r, &body) {
		return
	}
	decision, known := decisions[strings.ToLower(body.Decision)]
	if !known {
		WriteError(w, http.StatusBadRequest, "invalid_request", `decision must be "approve" or "deny"`)
		return
	}
	if len(body.Comment) > 2048 {
		WriteError(w, http.StatusBadRequest, "invalid_request", "comment is longer than 2048 bytes")
		return
	}
	if t.by == "" {
		WriteError(w, http.StatusBadRequest, "approver_required",
			"an approval records its approver: authenticate as a user, or send X-User-Id")
		return
	}
	gate := r.PathValue("gate_id")
	a := orch.ApprovalDecided{Gate: gate, Decision: decision, Comment: body.Comment, Answers: body.Answers, Extension: body.Extend}
	if len(body.Content) > 0 {
		if len(a.Answers) > 0 {
			WriteError(w, http.StatusBadRequest, "invalid_request", "send content or answers, not both")
			return
		}
		if err := g.answerOf(r.Context(), t, &a, body.Content); err != nil {
			g.gateError(w, t, err)
			return
		}
	}
	if decision != orch.GateApproved && (len(a.Answers) > 0 || a.Answer != "" || len(a.Extension) > 0) {
		WriteError(w, http.StatusBadRequest, "invalid_request", "only an approval answers a gate's question or extends a budget")
		return
	}
	g.decide(w, r.Context(), t, a)
}

// answerOf sets what an approval's content answers: a clarify gate's
// question (content a JSON string, or any JSON value as its text), or the
// question of the gate's only asking step (an elicitation gate).
func (g *Ingress) answerOf(ctx context.Context, t runTarget, a *orch.ApprovalDecided, content json.RawMessage) error {
	rec, _, err := g.cfg.Gates.Get(ctx, t.tenant, t.runID, a.Gate)
	if err != nil {
		return err
	}
	if rec.Gate.Kind == orch.GateClarify {
		var text string
		if json.Unmarshal(content, &text) != nil {
			text = string(content)
		}
		a.Answer = text
		return nil
	}
	var steps []int
	for _, act := range rec.Gate.Actions {
		if act.Resume.Elicit != nil {
			steps = append(steps, act.Step)
		}
	}
	if len(steps) != 1 {
		return fmt.Errorf("%w: gate %s holds %d questions; answer each by step (answers)", runctl.ErrInvalidAnswer, a.Gate, len(steps))
	}
	a.Answers = map[int]json.RawMessage{steps[0]: content}
	return nil
}

// gateError answers a failed gate decision.
func (g *Ingress) gateError(w http.ResponseWriter, t runTarget, err error) {
	switch {
	case errors.Is(err, runctl.ErrGateNotFound):
		WriteError(w, http.StatusNotFound, "not_found", "gate not found")
	case errors.Is(err, runctl.ErrInvalidAnswer):
		WriteError(w, http.StatusBadRequest, "invalid_answer", err.Error())
	case errors.Is(err, runctl.ErrInvalidExtension):
		WriteError(w, http.StatusBadRequest, "invalid_extension", err.Error())
	default:
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("resolve gate")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the decision could not be recorded")
	}
}

// decide resolves the gate of a (its gate, decision, comment and answers)
// for the target run, and sends the resolution to its router.
func (g *Ingress) decide(w http.ResponseWriter, ctx context.Context, t runTarget, a orch.ApprovalDecided) {
	a.RunID, a.TenantID, a.SessionID, a.By, a.At = t.runID, t.tenant, t.plan.SessionID, t.by, g.now()
	gate := a.Gate
	rec, _, err := g.cfg.Gates.Resolve(ctx, t.tenant, a)
	switch {
	case errors.Is(err, runctl.ErrGateDecided):
		WriteError(w, http.StatusConflict, "gate_decided", "the gate was already decided: "+rec.Status)
		return
	case err != nil:
		g.gateError(w, t, err)
		return
	}
	if rec.Applied != "" {
		// Decided and taken to the run already: a retried request.
		WriteJSON(w, http.StatusAccepted, runclient.ControlResponse{RunID: t.runID, PlanID: t.plan.PlanID, Status: rec.Status,
			GateID: gate, Decision: rec.Status, By: rec.By})
		return
	}
	// The record holds the decision; the event takes it to the run. A lost
	// one is taken from the record when the gate's expiry arrives.
	if err := g.sendDecision(ctx, t, rec); err != nil {
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("publish approval.decided")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the decision is recorded but could not be sent; retry")
		return
	}
	g.log.Info().Str("run_id", t.runID).Str("gate_id", gate).Str("decision", rec.Status).Str("by", rec.By).Msg("gate decided")
	status := rec.Status
	if rec.Status == orch.GateApproved {
		status = runclient.StatusResuming
	}
	WriteJSON(w, http.StatusAccepted, runclient.ControlResponse{RunID: t.runID, PlanID: t.plan.PlanID, Status: status,
		GateID: gate, Decision: rec.Status, By: rec.By})
}

// interrupt serves POST /agent/runs/{run_id}/interrupt: the run parks at
// its next hop (a step in flight finishes first), at an interrupt gate
// that POST /agent/runs/{run_id}/resume resumes and a cancel ends.
func (g *Ingress) interrupt(w http.ResponseWriter, r *http.Request) {
	t, ok := g.target(w, r)
	if !ok || !running(w, t) || !g.controls(w) {
		return
	}
	if err := g.cfg.Cancels.RequestInterrupt(r.Context(), t.tenant, t.runID, runctl.Interrupt{ID: uuid.NewString(), By: t.by,
		At: g.now()}); err != nil {
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("request interrupt")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the interrupt could not be recorded")
		return
	}
	g.log.Info().Str("run_id", t.runID).Str("tenant_id", t.tenant).Msg("run interrupt requested")
	WriteJSON(w, http.StatusAccepted, runclient.ControlResponse{RunID: t.runID, PlanID: t.plan.PlanID,
		Status: runclient.StatusInterrupting, By: t.by})
}

// resume serves POST /agent/runs/{run_id}/resume: an interrupted run
// takes its held hop. 409 not_paused when the run waits at no interrupt.
func (g *Ingress) resume(w http.ResponseWriter, r *http.Request) {
	t, ok := g.target(w, r)
	if !ok || !running(w, t) || !g.controls(w) {
		return
	}
	rec, open, err := g.cfg.Gates.OpenOf(r.Context(), t.tenant, t.runID, orch.GateInterrupt)
	if err != nil {
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("find interrupt gate")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the gates could not be read")
		return
	}
	if !open {
		WriteError(w, http.StatusConflict, "not_paused", "the run is not paused by an interrupt (yet)")
		return
	}
	g.decide(w, r.Context(), t, orch.ApprovalDecided{Gate: rec.Gate.ID, Decision: orch.GateApproved, Comment: "resumed"})
}

// steer serves POST /agent/runs/{run_id}/steer: a user message that every
// later model turn of the run's steps sees.
func (g *Ingress) steer(w http.ResponseWriter, r *http.Request) {
	t, ok := g.target(w, r)
	if !ok || !running(w, t) || !g.controls(w) {
		return
	}
	var body runclient.SteerRequest
	if !g.decodeBody(w, r, &body) {
		return
	}
	switch msg := strings.TrimSpace(body.Message); {
	case msg == "":
		WriteError(w, http.StatusBadRequest, "invalid_request", "message is empty")
		return
	case len(msg) > runctl.MaxSteerBytes:
		WriteError(w, http.StatusBadRequest, "invalid_request", "message is longer than 4 KiB")
		return
	}
	err := g.cfg.Cancels.AddSteer(r.Context(), t.tenant, t.runID, runctl.Steer{ID: uuid.NewString(), Message: strings.TrimSpace(body.Message),
		By: t.by, At: g.now()})
	switch {
	case errors.Is(err, runctl.ErrTooManySteers):
		WriteError(w, http.StatusConflict, "too_many_steers", err.Error())
		return
	case err != nil:
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("steer")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the message could not be recorded")
		return
	}
	WriteJSON(w, http.StatusAccepted, runclient.ControlResponse{RunID: t.runID, PlanID: t.plan.PlanID,
		Status: runclient.StatusSteered, By: t.by})
}

// cancel cancels a run of the caller's tenant: 202 cancelling (also when
// it was already cancelled), 404 not_found for a run the tenant does not
// have, exactly as for a missing one, and 409 run_finished for a run that
// ended. A run parked at a gate has nothing in flight to see the cancel:
// its gate is resolved cancelled.
func (g *Ingress) cancel(w http.ResponseWriter, r *http.Request) {
	t, ok := g.targetOf(w, r, true)
	if !ok || !running(w, t) {
		return
	}
	if g.cfg.Cancels == nil {
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "cancelling is not configured")
		return
	}
	first, err := g.cfg.Cancels.Request(r.Context(), t.tenant, t.runID, runctl.Cancel{By: t.by, At: time.Now().UTC()})
	if err != nil {
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("request cancel")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the cancel could not be recorded")
		return
	}
	if first {
		g.log.Info().Str("run_id", t.runID).Str("tenant_id", t.tenant).Msg("run cancel requested")
	}
	if g.cfg.Gates != nil {
		g.cancelGate(r.Context(), t)
	}
	WriteJSON(w, http.StatusAccepted, runclient.CancelResponse{RunID: t.runID, PlanID: t.plan.PlanID, Status: runclient.StatusCancelling})
}

// cancelGate resolves the open gate of a cancelled run, if it has one, and
// sends the resolution to its router. A gate decided meanwhile keeps its
// decision: the cancel key then stops the run at its next hop.
func (g *Ingress) cancelGate(ctx context.Context, t runTarget) {
	rec, open, err := g.cfg.Gates.OpenOf(ctx, t.tenant, t.runID, "")
	if err != nil || !open {
		if err != nil {
			g.log.Warn().Err(err).Str("run_id", t.runID).Msg("find the gate of a cancelled run")
		}
		return
	}
	a := orch.ApprovalDecided{RunID: t.runID, TenantID: t.tenant, SessionID: t.plan.SessionID, Gate: rec.Gate.ID,
		Decision: orch.GateCancelled, By: t.by, At: g.now()}
	if rec, _, err = g.cfg.Gates.Resolve(ctx, t.tenant, a); err != nil {
		g.log.Info().Err(err).Str("run_id", t.runID).Msg("the gate of a cancelled run was decided first")
		return
	}
	if err := g.sendDecision(ctx, t, rec); err != nil {
		g.log.Error().Err(err).Str("run_id", t.runID).Msg("publish approval.decided; the gate's expiry will apply it")
	}
}

// sendDecision publishes a gate's recorded resolution to its run's router.
// Its id derives from the gate, so a retry stores it once.
func (g *Ingress) sendDecision(ctx context.Context, t runTarget, rec runctl.GateRecord) error {
	a := orch.ApprovalDecided{RunID: t.runID, TenantID: t.tenant, SessionID: t.plan.SessionID, Gate: rec.Gate.ID,
		Decision: rec.Status, By: rec.By, Comment: rec.Comment, At: rec.DecidedAt, Answers: rec.Answers, EndSession: rec.EndSession,
		Answer: rec.Answer, AnswerRun: rec.AnswerRun, Extension: rec.Extension}
	ev, err := events.New(events.DeriveID(rec.Gate.ID, "decided/"+rec.Status), events.TypeApprovalDecided,
		events.Meta{Tenant: t.tenant, Session: t.plan.SessionID, Run: t.runID, SourceProcess: "ingress"}, a)
	if err != nil {
		return err
	}
	return events.Publish(ctx, g.js, ev)
}
