package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/metrics"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
)

// Router is the manager. It is a thin adapter around the run decider
// (orch.Decide): it decodes the input, does the model calls the decision
// needs (routing, synthesis), and publishes what the decider decided. It
// never calls a skill.
type Router struct {
	Model llm.Model // routing, reviews, classification and session summaries
	// Synthesiser writes the final answer; nil uses Model.
	Synthesiser llm.Model
	Store       RouterStore
	Config      jetstream.KeyValue // task types; nil uses the defaults
	// JS, when set, reads the config bucket's values for a run in one
	// request.
	JS jetstream.JetStream
	// Following, when set, holds the config bucket's run configuration as
	// a watch follows it: a run's first hop reads none.
	Following *ConfigFollower
	Log       zerolog.Logger
	Now       func() time.Time
	// Credentials, when set, forgets a run's forwarded API key once the
	// run has ended.
	Credentials *runctl.Credentials
	// Replies, when set, streams the answer of runs that asked for it.
	Replies *handlers.Replies
	// Sessions, when set, gives each run its session's history and keeps
	// the exchange of every finished run.
	Sessions *runctl.Sessions
	// Locks, when set, is the memory locks bucket: the router frees the
	// lock of each step output once it has the step's result.
	Locks jetstream.KeyValue
	// Cancels are the cancelled runs: an input of one ends it USER_CANCEL
	// instead of taking its next hop. Nil cancels none.
	Cancels *runctl.Cancels
	// DailyTokens is the daily token quota of the tenants the budget
	// policy gives none (orch.BudgetPolicy.WithDefaultDailyTokens); 0:
	// none.
	DailyTokens float64
	// Budgets is the budget ledger the router's model calls (routing,
	// synthesis) draw from; nil draws nothing.
	Budgets *ledger.Budgets
	// Gates keeps the runs parked at a gate; a run that would park
	// without it fails its hop.
	Gates *runctl.Gates
	// SessionRuns, when set, runs each session's runs one at a time, in
	// the order they arrive; nil runs them as they come.
	SessionRuns *runctl.SessionRuns
	// Records are the tenants' payload record choices: a tenant that
	// keeps them has its model calls' requests and answers traced; nil
	// keeps none.
	Records *runctl.RecordPolicy
	// Outbound, when set, sends a channel session's answer (and a
	// clarify gate's question) to its conversation, as send_message does.
	Outbound Outbound
	// Recall, when set, gives each run the long-term memories of its
	// tenant, user and session most similar to its task, recorded in its
	// state (context.memories) and trace (memory.recalled).
	Recall *memory.Recall
}

// NewRouter returns a router.
func NewRouter(model llm.Model, st RouterStore, config jetstream.KeyValue, log zerolog.Logger) *Router {
	return &Router{Model: model, Store: st, Config: config, Log: log, Now: time.Now}
}

// Routes are the events the router consumes.
func (r *Router) Routes() []events.Route {
	return []events.Route{
		events.On(events.TypeRunRequested, func(ctx context.Context, ev event.Event, req orch.RunRequest) ([]event.Event, error) {
			if out, held, err := r.admitted(ctx, ev, req); held || err != nil {
				return out, err
			}
			in := r.unlessCancelled(req, orch.Requested{Request: req, At: r.at(ev)}, r.at(ev))
			if _, cancelled := in.(orch.Cancelled); !cancelled {
				var err error
				if in, err = r.route(ctx, req, r.at(ev)); err != nil {
					return nil, err
				}
			}
			return r.decide(ctx, ev, orch.State{}, in)
		}),
		events.On(events.TypePlanProposed, func(ctx context.Context, ev event.Event, p orch.PlanProposal) ([]event.Event, error) {
			return r.decide(ctx, ev, p.Run, r.control(p.Run, orch.Planned{Proposal: p, At: r.at(ev)}, r.at(ev)))
		}),
		events.On(events.TypeGroupJoined, func(ctx context.Context, ev event.Event, j orch.GroupJoined) ([]event.Event, error) {
			return r.joined(ctx, ev, j.Run, orch.Joined{Group: j.Group, Results: j.Results, Partial: j.Partial})
		}),
		events.On(events.TypeStepJoined, func(ctx context.Context, ev event.Event, j orch.StepJoined) ([]event.Event, error) {
			return r.joined(ctx, ev, j.Run, orch.Joined{Group: j.Group, Results: []orch.StepResult{j.Result}})
		}),
		events.On(events.TypeRunDeadline, r.runDeadline),
		events.On(events.TypeApprovalDecided, r.approvalDecided),
		events.On(events.TypeDeadLettered, func(ctx context.Context, ev event.Event, dl events.DeadLetter) ([]event.Event, error) {
			if dl.RunID == "" || dl.Trail {
				return nil, nil // no run to end; a trail's failure ends no run
			}
			return r.decide(ctx, ev, orch.State{}, r.deadLettered(ev, dl))
		}),
	}
}

// joined decides a joined group and frees the memory locks of its outputs,
// now that the plan has them.
func (r *Router) joined(ctx context.Context, ev event.Event, run orch.RunState, j orch.Joined) ([]event.Event, error) {
	j.At = r.at(ev)
	if err := r.handoffTarget(ctx, run, &j); err != nil {
		return nil, err
	}
	out, err := r.decide(ctx, ev, run, r.control(run, j, j.At))
	if err == nil {
		memory.ReleaseMemoryLocks(ctx, r.Locks, j.Group, j.Results)
	}
	return out, err
}

// handoffTarget loads the agent a member's handoff names, for the
// decider to take the run on as it (or to refuse the handoff with why it
// could not be loaded).
func (r *Router) handoffTarget(ctx context.Context, run orch.RunState, j *orch.Joined) error {
	i := slices.IndexFunc(j.Results, func(res orch.StepResult) bool {
		return res.Outcome == orch.OutcomeHandoff && res.Handoff != nil && res.Handoff.To == orch.HandoffToAgent
	})
	if i < 0 {
		return nil
	}
	a, err := handlers.LoadRunDef(ctx, r.Store, run.Request.TenantID, j.Results[i].Handoff.TargetAgentID)
	var refused *agents.Error
	switch {
	case errors.As(err, &refused):
		j.TargetError = refused.Message
	case err != nil:
		return err
	default:
		j.Target = a
	}
	return nil
}

// Handle is the router's events.Handler.
func (r *Router) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(handlers.RoleRouter, r.Routes()...)(ctx, ev)
}

// unlessCancelled returns in, or when the run is cancelled the input that
// ends it: orch.Cancelled, wrapping in, with who cancelled and when.
func (r *Router) unlessCancelled(req orch.RunRequest, in orch.Input, at time.Time) orch.Input {
	c, ok := r.Cancels.Lookup(req.TenantID, req.RunID)
	if !ok {
		return in
	}
	return orch.Cancelled{Input: in, By: c.By, RequestedAt: c.At, Timeout: c.Reason == runctl.CancelTimeout, At: at}
}

// at is the time of the decision an input makes: the input event's own
// time, so a redelivered input decides exactly what its first delivery did
// and a replay of the recorded input re-derives it (the router's clock
// only when the event has none).
func (r *Router) at(ev event.Event) time.Time {
	if t := ev.Time(); !t.IsZero() {
		return t.UTC()
	}
	return r.Now().UTC()
}

// control returns in, or the input that a control of the run's makes of
// it: a cancel ends the run (unlessCancelled); an interrupt the run has
// not honoured yet parks it before its next hop (orch.Interrupted).
func (r *Router) control(run orch.State, in orch.Input, at time.Time) orch.Input {
	out := r.unlessCancelled(run.Request, in, at)
	if _, cancelled := out.(orch.Cancelled); cancelled {
		return out
	}
	if i, ok := r.Cancels.Interrupt(run.Request.TenantID, run.Request.RunID); ok && i.ID != run.Interrupt {
		return orch.Interrupted{Input: in, ID: i.ID, By: i.By, At: at}
	}
	return in
}

// approvalDecided takes a gate's resolution to its run. The gate's record
// is the authority: an open gate is resolved by this input (its TTL's
// expiry, or a NATS client's decision); a gate the ingress resolved is
// taken as recorded. The resolution is applied once, by the first input
// that claims it; the parked state is the decider's state.
func (r *Router) approvalDecided(ctx context.Context, ev event.Event, a orch.ApprovalDecided) ([]event.Event, error) {
	if r.Gates == nil {
		return nil, errors.New("handlers: approval.decided, but no gates bucket is configured")
	}
	rec, rev, err := r.Gates.Get(ctx, a.TenantID, a.RunID, a.Gate)
	if errors.Is(err, runctl.ErrGateNotFound) {
		// Nothing to apply; a dead letter would end the run, which may be
		// going on fine, so the message is acknowledged and logged.
		r.Log.Warn().Str("run_id", a.RunID).Str("gate_id", a.Gate).Msg("approval.decided for a gate the run does not have; ignored")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if rec.Status == orch.GateOpen {
		if a.At.IsZero() {
			a.At = r.Now()
		}
		// Resolved meanwhile otherwise: the record's decision stands.
		rec, rev, err = r.Gates.Resolve(ctx, a.TenantID, a)
		if errors.Is(err, runctl.ErrInvalidAnswer) {
			// The gate stays open for a valid answer (or its expiry).
			r.Log.Warn().Err(err).Str("run_id", a.RunID).Str("gate_id", a.Gate).Msg("approval.decided with an invalid answer; ignored")
			return nil, nil
		}
		if err != nil && !errors.Is(err, runctl.ErrGateDecided) {
			return nil, err
		}
	}
	if ok, err := r.Gates.Apply(ctx, rec, rev, ev.ID()); err != nil || !ok {
		return nil, err // applied by another input
	}
	r.Log.Info().Str("run_id", a.RunID).Str("gate_id", a.Gate).Str("decision", rec.Status).Str("by", rec.By).Msg("gate resolved")
	metrics.GateWait(rec.Gate.Kind, rec.Status, rec.DecidedAt.Sub(rec.Gate.OpenedAt))
	resolved, err := r.clarified(ctx, rec)
	if err != nil {
		return nil, err
	}
	// The decision's time is the resolution's (a scheduled expiry carries
	// its gate's expiry), as the record keeps it.
	return r.decide(ctx, ev, rec.State, r.unlessCancelled(rec.State.Request, resolved, rec.DecidedAt))
}

// decide runs the decider on one input, answers its synthesis request and
// returns the events of the decision. The hop writes nothing to the store:
// the projector writes the plan projection from the decision's audit trail.
func (r *Router) decide(ctx context.Context, ev event.Event, state orch.State, in orch.Input) ([]event.Event, error) {
	d := orch.Decide(state, in)
	if d.Review != nil {
		rv, err := r.review(ctx, ev, d.State, *d.Review)
		if err != nil {
			return nil, err
		}
		d = orch.Continue(d, rv)
	}
	if d.Synthesise != nil {
		syn, err := r.synthesise(ctx, ev, d.State, *d.Synthesise)
		if err != nil {
			return nil, err
		}
		d = orch.Continue(d, syn)
	}
	if d.Opened != nil {
		// The run waits with its gate: nothing of it is in flight.
		if err := r.Gates.Open(ctx, d.State, *d.Opened); err != nil {
			return nil, err
		}
		if err := r.handOff(ctx, &d); err != nil {
			return nil, err
		}
		if err := r.asking(ctx, &d); err != nil {
			return nil, err
		}
	}
	var next *orch.RunRequest
	if d.Ended != nil {
		r.Credentials.Forget(ctx, d.Ended.RunID, d.State.Request)
		if err := r.keepExchange(ctx, &d); err != nil {
			return nil, err
		}
		// After the exchange: its summary's model call is the run's last.
		if err := r.settleLease(ctx, &d); err != nil {
			return nil, err
		}
		r.markPayloadRecords(&d)
		// Whatever ended it (a dead-lettered request carries only its
		// ids), the run frees its session for the next.
		if q := d.State.Request; orch.ValidateID("tenant_id", q.TenantID) == nil && orch.ValidateID("session_id", q.SessionID) == nil &&
			orch.ValidateID("run_id", q.RunID) == nil {
			var err error
			if next, err = r.SessionRuns.Next(ctx, q); err != nil {
				return nil, err
			}
		}
	}
	if err := r.deliver(ctx, &d); err != nil {
		return nil, err
	}
	out, err := publish(ev, d, state.Plan.Status)
	if err != nil || next == nil {
		return out, err
	}
	// The session's next run: its request again, under an id of its own
	// (the first was taken when it was queued), the same whichever hop
	// submits it.
	again, err := events.New(events.DeriveID(next.RunID, "session/dequeued"), events.TypeRunRequested,
		events.Meta{Tenant: next.TenantID, Session: next.SessionID, Run: next.RunID, SourceProcess: handlers.RoleRouter}, *next)
	if err != nil {
		return nil, err
	}
	return append(out, again), nil
}

// queue holds a valid request back while another run of its session is in
// flight: the hop then only records where the run waits (run.queued, also
// a progress chunk of a run that streams). The run starts when the runs
// ahead of it have ended (SessionRuns.Next).
func (r *Router) queue(ctx context.Context, ev event.Event, req orch.RunRequest) ([]event.Event, bool, error) {
	if r.SessionRuns == nil || orch.ValidateRequest(req) != nil {
		return nil, false, nil
	}
	q, err := r.SessionRuns.Admit(ctx, req)
	if errors.Is(err, runctl.ErrSessionQueueFull) {
		r.Log.Warn().Str("run_id", req.RunID).Str("session_id", req.SessionID).
			Msgf("the session queues %d runs already: this one starts out of order", runctl.MaxSessionQueue)
		return nil, false, nil
	}
	if err != nil || q == nil {
		return nil, false, err
	}
	// The run in flight may be waiting for an answer: this message is
	// it, and starts no run of its own.
	if out, answered, err := r.answer(ctx, ev, req); answered || err != nil {
		if err == nil {
			err = r.SessionRuns.Withdraw(ctx, req)
		}
		return out, true, err
	}
	out := handlers.Outbox{In: ev}
	out.Audit(handlers.AuditRunQueued, events.Audit{PlanID: orch.PlanID(req.RunID), UserID: req.UserID}, q)
	if req.Stream {
		payload, _ := json.Marshal(q)
		out.Emit("reply/queued", events.TypeReplyChunk, runclient.Chunk{MessageID: events.DeriveID(ev.ID(), "reply/queued"),
			SessionID: req.SessionID, MessageType: "progress", Content: handlers.AuditRunQueued + " " + string(payload), EndOfMessage: true})
	}
	evs, err := out.Result()
	return evs, true, err
}

// keepExchange appends a finished run's message and answer to its session
// before the caller gets the answer, and records the session in the trace.
// A run of an agent whose end folds turns out of its history window has
// their summary written by the model first (summarise).
func (r *Router) keepExchange(ctx context.Context, d *orch.Decision) error {
	req := d.State.Request
	if r.Sessions == nil || d.Session == nil || orch.ValidateRequest(req) != nil {
		return nil // no session, or a run its session refused
	}
	fresh := len(d.State.Context.History) == 0
	written, err := r.summarise(ctx, d, fresh)
	if err != nil {
		return err
	}
	up, err := r.Sessions.AppendSummarised(ctx, req, d.Ended.Response, r.Now().UTC(), fresh, d.Session, written)
	if err != nil {
		return err
	}
	up.Code = d.Ended.TerminalCode
	beforeEnd(d, orch.Audit{Name: runctl.AuditSessionUpdated, Payload: up})
	return nil
}

// AuditQuotaSettled records that an ended run's lease of its token quotas
// was settled: what it held and what it used.
const AuditQuotaSettled = "quota.settled"

// settleLease charges an ended run's quotas what it used and frees the
// rest of its lease (ledger.SettleLease), before the caller gets the
// answer, and records it in the trace.
func (r *Router) settleLease(ctx context.Context, d *orch.Decision) error {
	lease := d.State.Budget.Lease
	if lease == nil {
		return nil
	}
	if _, err := r.Budgets.SettleLease(ctx, d.State); err != nil {
		return err
	}
	known := d.State.Known()
	beforeEnd(d, orch.Audit{Name: AuditQuotaSettled, Payload: map[string]any{"leased": lease.Tokens, "keys": lease.Keys,
		"used": known[orch.DimInputTokens] + known[orch.DimOutputTokens]}})
	return nil
}

// beforeEnd adds a to the decision's trace before its run.finished, if it
// has one: the trace still ends with it.
func beforeEnd(d *orch.Decision, a orch.Audit) {
	i := slices.IndexFunc(d.Audits, func(a orch.Audit) bool { return a.Name == "run.finished" })
	if i < 0 {
		i = len(d.Audits)
	}
	d.Audits = slices.Insert(d.Audits, i, a)
}

// handOff marks the session of a run the decision handed to a human
// (status handed_off, with the packet a reply answers) before the hop
// publishes, and records it in the trace.
func (r *Router) handOff(ctx context.Context, d *orch.Decision) error {
	c := d.Session
	if r.Sessions == nil || c == nil || c.Status != orch.SessionHandedOff || orch.ValidateRequest(d.State.Request) != nil {
		return nil
	}
	up, err := r.Sessions.HandOff(ctx, d.State.Request, *c, r.Now().UTC())
	if err != nil {
		return err
	}
	d.Audits = append(d.Audits, orch.Audit{Name: runctl.AuditSessionUpdated, Payload: up})
	return nil
}

// publish turns a decision into the events of the hop: its audit trail,
// the plan projection the run now has (with plan.persisted in the trace
// when its status changed from was), then its orchestration messages.
func publish(in event.Event, d orch.Decision, was string) ([]event.Event, error) {
	out := handlers.Outbox{In: in}
	lineage := events.Audit{PlanID: d.State.Plan.PlanID, UserID: d.State.Request.UserID}
	p := d.State.Plan
	persisted := p.PlanID == "" || p.Status == was
	persist := func() {
		if !persisted {
			persisted = true
			out.Audit(handlers.AuditPlanPersisted, lineage, map[string]any{"status": p.Status, "steps": len(p.Steps),
				"version": d.State.Seq, "replan_count": p.ReplanCount})
		}
	}
	for _, a := range d.Audits {
		if a.Name == "run.finished" {
			persist() // the run's end stays the last event of its trace
		}
		l := lineage
		l.TaskID = a.TaskID
		out.Audit(a.Name, l, a.Payload)
	}
	persist()
	if p.PlanID != "" {
		pp := handlers.PlanProjected{Version: d.State.Seq}
		if !carriesState(d) {
			plan := handlers.Projection(d.State)
			pp.Plan = &plan
		}
		out.Audit(handlers.AuditPlanProjected, lineage, pp)
	}
	// A run that asked for a stream has one; so has a run once it parked
	// at a gate, whoever follows it after the decision
	// (GET /agent/runs/{run_id}/stream).
	if d.State.Request.Stream || d.State.Gate != nil || len(d.State.Approvals) > 0 {
		progressChunks(&out, d)
	}
	for _, e := range d.Emits {
		typ, err := emittedType(e.Data)
		if err != nil {
			return nil, err
		}
		switch {
		case e.RunScope != "" && !e.At.IsZero():
			out.EmitIDAt(events.DeriveID(e.RunScope, e.Key), typ, e.Data, e.At)
		case e.RunScope != "":
			out.EmitID(events.DeriveID(e.RunScope, e.Key), typ, e.Data)
		case !e.At.IsZero():
			out.EmitAt(e.Key, typ, e.Data, e.At)
		default:
			out.Emit(e.Key, typ, e.Data)
		}
	}
	return out.Result()
}

// carriesState reports whether the hop's trail rides in a message that
// carries the decision's state: its first message on AGENT that is not
// scheduled (events.HeaderTrail) is a plan.requested or step.requested,
// whose run state the decider emits as the decision's own. The projector
// then derives the plan projection from that message
// (handlers.ProjectionOf) and the trail's plan.projected need not repeat
// it.
func carriesState(d orch.Decision) bool {
	for _, e := range d.Emits {
		if !e.At.IsZero() {
			continue
		}
		var run orch.RunState
		switch v := e.Data.(type) {
		case orch.PlanRequest:
			run = v.Run
		case orch.StepRequest:
			run = v.Run
		default:
			return false
		}
		return run.Seq == d.State.Seq && run.Plan.PlanID == d.State.Plan.PlanID
	}
	return false
}

// emittedType is the event type of a message the decider emits.
func emittedType(data any) (string, error) {
	switch data.(type) {
	case orch.PlanRequest:
		return events.TypePlanRequested, nil
	case orch.StepRequest:
		return events.TypeStepRequested, nil
	case orch.RunResult:
		return events.TypeRunFinished, nil
	case orch.GroupDeadline:
		return events.TypeGroupDeadline, nil
	case orch.RunDeadline:
		return events.TypeRunDeadline, nil
	case orch.ApprovalDecided:
		return events.TypeApprovalDecided, nil
	case orch.RunParked:
		return events.TypeRunParked, nil
	}
	return "", fmt.Errorf("handlers: the decider emitted %T, which no event type carries", data)
}

// route asks the routing model for a task type and pattern among the
// configured ones. A model failure that retrying cannot fix ends the run;
// any other error redelivers the request.
func (r *Router) route(ctx context.Context, req orch.RunRequest, at time.Time) (orch.Input, error) {
	in := orch.Requested{Request: req, At: at}
	if orch.ValidateRequest(req) != nil {
		return in, nil // the decider ends the run VALIDATION_FAIL
	}
	// What a run starts from is read at once, each read one round trip;
	// the errors are then taken in the order the reads were needed.
	l := r.loadStart(ctx, req, at)
	sess, err := l.sess, l.sessErr
	if err != nil {
		return nil, err
	}
	in.Session = handlers.SessionState(sess)
	if err := l.recallErr; err != nil && ctx.Err() == nil {
		// The run goes on without its memories; the trace says why.
		r.Log.Warn().Err(err).Str("run_id", req.RunID).Msg("no memory recalled")
		in.RecallError = err.Error()
	}
	agentID, refused := orch.SessionAgent(req, in.Session)
	if refused != nil {
		return in, nil // the decider ends the run, leaving the session as it is
	}
	if agentID != "" {
		// The run acts as its agent (its session's current one) as
		// defined now: the decider records the definition, so later
		// edits do not reach a running run.
		a, err := handlers.LoadRunDef(ctx, r.Store, req.TenantID, agentID)
		var refused *agents.Error
		switch {
		case errors.As(err, &refused):
			in.AgentError = refused.Message
			return in, nil // the decider ends the run VALIDATION_FAIL
		case err != nil:
			return nil, err
		}
		in.Agent = a
		if sess != nil && in.Agent.MaxTurns > 0 {
			in.SessionTurns = sess.TurnCount
		}
		if orch.TurnLimitReached(in.Agent, in.SessionTurns) {
			// No turn left: the decider applies the agent's handoff
			// behaviour, without a model call.
			in.Context, err = l.runContext(sess)
			return in, err
		}
	}
	if l.configErr != nil {
		return nil, l.configErr
	}
	tts := l.taskTypes
	in.TaskTypes, in.Patterns, in.Policy = tts, l.patterns, l.policy.WithDefaultDailyTokens(r.DailyTokens)
	if in.Context, err = l.runContext(sess); err != nil {
		return nil, err
	}
	// The routing call draws on the limits known before the task type
	// is: the decider then resolves the run's own.
	limits, _ := in.Policy.Limits(req.TenantID, "", 0, req.Budget)
	agent := ""
	if in.Agent != nil {
		agent = in.Agent.ID
	}
	rb := ledger.NewRunBudget(req.TenantID, req.RunID, limits, in.At.Add(time.Duration(limits[orch.DimWallClockS]*float64(time.Second))),
		in.Policy.QuotasFor(req.TenantID, agent, req.SessionID))
	// The run's lease of its token quotas, before its first model call: a
	// quota with nothing left refuses the run here.
	if in.QuotaLease, err = r.Budgets.OpenLease(ctx, rb); err != nil {
		if in.Failure = handlers.FailureOf(err); in.Failure == nil {
			return nil, fmt.Errorf("handlers: lease the run's quotas: %w", err)
		}
		if in.Agent != nil && in.Agent.Type == orch.TypeRouterAgent {
			in.AgentRoute = &orch.AgentRoute{Failure: in.Failure}
		}
		return in, nil
	}
	rb = rb.WithLease(in.QuotaLease)
	if in.Agent != nil && in.Agent.Type == orch.TypeRouterAgent {
		// A router agent first classifies the message: the run goes on
		// as the sub-agent it chose (agent_route.go).
		if in.AgentRoute, err = r.agentRoute(ctx, req, in.Agent, rb); err != nil || in.AgentRoute.SubAgent == nil {
			return in, err
		}
	}
	rec := llm.Record(r.Model).KeepPayloads(r.Records.Keeps(req.TenantID))
	mreq := llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: req.Message, TaskTypes: tts, Patterns: in.Patterns})
	mreq.Schema = llm.RouteSchema
	// A choice outside the configured options is rejected and repaired.
	_, err = llm.StructuredCheck(ctx, r.Budgets.Model(rec, rb), mreq, &in.Route, func() error { return orch.CheckRoute(in.Route, tts) })
	in.Calls = rec.Calls()
	if err != nil {
		if in.Failure = handlers.FailureOf(err); in.Failure == nil {
			return nil, fmt.Errorf("handlers: route: %w", err)
		}
	}
	return in, nil
}

// session is the run's session, nil for a new one (or without a
// sessions bucket).
func (r *Router) session(ctx context.Context, req orch.RunRequest) (*store.Session, error) {
	if r.Sessions == nil {
		return nil, nil
	}
	sess, _, err := r.Sessions.Get(ctx, req.TenantID, req.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &sess, nil
}

// startReads is what a run's first hop reads, each with its error: its
// session, the task types, patterns and budget policy, and the souls of
// its user and of its tenant.
type startReads struct {
	sess                        *store.Session
	taskTypes                   []llm.TaskType
	patterns                    []llm.Pattern
	policy                      orch.BudgetPolicy
	soul                        store.Soul
	memories                    []llm.RecalledMemory
	sessErr, configErr, soulErr error
	recallErr                   error
}

// loadStart makes the reads of a run's first hop concurrently: one round
// trip's wait instead of seven.
func (r *Router) loadStart(ctx context.Context, req orch.RunRequest, at time.Time) *startReads {
	l := &startReads{}
	var wg sync.WaitGroup
	wg.Go(func() { l.memories, l.recallErr = r.Recall.Memories(ctx, req, at) })
	wg.Go(func() { l.sess, l.sessErr = r.session(ctx, req) })
	wg.Go(func() {
		var rc runConfig
		if r.Following != nil {
			rc, l.configErr = r.Following.current()
		} else {
			rc, l.configErr = loadRunConfig(ctx, r.JS, r.Config)
		}
		l.taskTypes, l.patterns, l.policy = rc.taskTypes, rc.patterns, rc.policy
	})
	wg.Go(func() { l.soul, l.soulErr = r.Store.SoulFor(ctx, req.TenantID, req.UserID) })
	wg.Wait()
	return l
}

// runContext is what a new run knows of its caller: the soul of its user,
// else of its tenant, the history of its session (sess, as route read
// it: nil for a new one) and the memories it recalled.
func (l *startReads) runContext(sess *store.Session) (orch.RunContext, error) {
	var rc orch.RunContext
	soul, err := l.soul, l.soulErr
	switch {
	case err == nil:
		rc.Persona = PersonaOf(soul)
	case !errors.Is(err, store.ErrNotFound):
		return rc, fmt.Errorf("handlers: load soul: %w", err)
	}
	rc.History = runctl.HistoryOf(sess)
	rc.Memories = l.memories
	return rc, nil
}

// PersonaOf is a soul as the models see it.
func PersonaOf(s store.Soul) *llm.Persona {
	return &llm.Persona{Name: s.Persona.Name, Instructions: s.Persona.SystemPrompt, Tone: s.Persona.Tone,
		Language: s.Persona.Language, Policies: s.Policies}
}

// synthesise writes the final answer from the outputs of the completed
// steps, streaming it onto the REPLY stream when the run asked for it.
func (r *Router) synthesise(ctx context.Context, ev event.Event, run orch.State, syn orch.Synthesise) (orch.Synthesised, error) {
	in := llm.SynthInput{Task: syn.Task, Persona: run.Context.Persona, History: run.Context.History,
		Memories: run.Context.Memories}
	var err error
	if in.Outputs, err = r.outputs(ctx, run, syn.Steps); err != nil {
		return orch.Synthesised{}, err
	}
	synth := r.Synthesiser
	if synth == nil {
		synth = r.Model
	}
	rec := llm.Record(synth).KeepPayloads(r.Records.Keeps(run.Request.TenantID))
	req := llm.NewRequest(llm.TaskSynthesize, in)
	var stream *handlers.ReplyStream
	if run.Request.Stream {
		stream = r.Replies.Open(ev, "answer")
		req.Stream = func(delta string) { stream.Write(delta, false) }
	}
	resp, err := handlers.AgentModel(r.Budgets.Model(rec, ledger.BudgetOf(run)), run.Agent).Complete(ctx, req)
	if err := stream.Close(ctx); err != nil {
		r.Log.Warn().Err(err).Str("run_id", run.Request.RunID).Msg("answer not streamed; the caller gets it whole")
	}
	out := orch.Synthesised{Answer: resp.Message.Content, Calls: rec.Calls(), At: r.at(ev)}
	if err != nil {
		if out.Failure = handlers.FailureOf(err); out.Failure == nil {
			return out, fmt.Errorf("handlers: synthesise: %w", err)
		}
	}
	return out, nil
}

// outputs are the stored outputs of steps: small ones ride in the run
// state; the others are read.
func (r *Router) outputs(ctx context.Context, run orch.State, steps []orch.Step) ([]llm.StepOutput, error) {
	var keys []string
	for _, s := range steps {
		if run.Plan.Carried(s.MemoryKey) == nil {
			keys = append(keys, s.MemoryKey)
		}
	}
	mems, err := memory.ReadMemories(ctx, r.Store, keys)
	if err != nil {
		return nil, err
	}
	out := make([]llm.StepOutput, 0, len(steps))
	for _, s := range steps {
		v := run.Plan.Carried(s.MemoryKey)
		if v == nil {
			v, mems = json.RawMessage(mems[0].Text), mems[1:]
		}
		out = append(out, llm.StepOutput{Step: s.Index, Task: s.Task, Value: v})
	}
	return out, nil
}

// review answers a supervisor's Review: one recorded model call judges
// whether the lanes' findings answer the task (seed 001's re-iteration).
// A model that fails is the input's failure, as a synthesis's is.
func (r *Router) review(ctx context.Context, ev event.Event, run orch.State, rv orch.Review) (orch.Reviewed, error) {
	outs, err := r.outputs(ctx, run, rv.Steps)
	if err != nil {
		return orch.Reviewed{}, err
	}
	rec := llm.Record(r.Model).KeepPayloads(r.Records.Keeps(run.Request.TenantID))
	req := llm.NewRequest(llm.TaskReview, llm.ReviewInput{Task: rv.Task, Framing: run.Framing, Outputs: outs, Iteration: rv.Iteration})
	req.Schema = llm.ReviewSchema
	var out llm.ReviewOutput
	_, err = llm.StructuredCheck(ctx, handlers.AgentModel(r.Budgets.Model(rec, ledger.BudgetOf(run)), run.Agent), req, &out, nil)
	res := orch.Reviewed{Sufficient: out.Sufficient, Gaps: out.Gaps, Calls: rec.Calls(), At: r.at(ev)}
	if err != nil {
		if res.Failure = handlers.FailureOf(err); res.Failure == nil {
			return res, fmt.Errorf("handlers: review: %w", err)
		}
	}
	return res, nil
}

// deadLettered reads a dead letter into the decider's input.
func (r *Router) deadLettered(ev event.Event, dl events.DeadLetter) orch.Input {
	in := orch.DeadLettered{RunID: dl.RunID, TenantID: events.MetaOf(ev).Tenant, Reason: dl.Reason, At: r.at(ev),
		FromRequest: events.TypeOfSubject(dl.Subject) == events.TypeRunRequested, Exhausted: dl.Exhausted}
	if v := dl.Headers["ce-"+events.ExtSession]; len(v) > 0 {
		in.SessionID = v[0]
	}
	var carried struct {
		Run *orch.State `json:"run"`
	}
	if json.Unmarshal(dl.Original, &carried) == nil {
		in.Carried = carried.Run
	}
	return in
}

// progressChunks publishes, for a run that streams, its progress (the
// trace events a caller follows) and, when the decision ends it, its
// result as chunks on the REPLY stream, where the ingress serves them from
// (resumable by stream sequence). Each chunk's id derives from the input
// and the audit, so a redelivered hop stores no second copy.
func progressChunks(out *handlers.Outbox, d orch.Decision) {
	session := d.State.Request.SessionID
	for i, a := range d.Audits {
		if !ProgressEvent(a.Name) {
			continue
		}
		payload, _ := json.Marshal(a.Payload)
		key := fmt.Sprintf("reply/progress/%d/%s", i, a.Name)
		out.Emit(key, events.TypeReplyChunk, runclient.Chunk{MessageID: events.DeriveID(out.In.ID(), key), SessionID: session,
			MessageType: "progress", Content: a.Name + " " + string(payload), EndOfMessage: true})
	}
	if g := d.Opened; g != nil {
		// The run waits: a caller following the stream sees the packet
		// (the stream goes on once the gate is resolved).
		body, _ := json.Marshal(g.Packet())
		key := "reply/gate/" + g.ID
		out.EmitID(events.DeriveID(d.State.Request.RunID, key), events.TypeReplyChunk, runclient.Chunk{
			MessageID: events.DeriveID(d.State.Request.RunID, key), SessionID: session, MessageType: runclient.ChunkAwaitingGate,
			Content: string(body), EndOfMessage: true})
	}
	if d.Ended == nil {
		out.Emit("reply/session_progress", events.TypeReplyChunk, runclient.Chunk{
			MessageID: events.DeriveID(out.In.ID(), "reply/session_progress"), SessionID: session,
			MessageType: runclient.ChunkProgress, Content: sessionProgress(out.In, d.State), EndOfMessage: true})
	}
	if res := d.Ended; res != nil {
		typ := "result"
		if res.TerminalCode != orch.CodeSuccess && res.TerminalCode != orch.CodePartialSuccess {
			typ = "error"
		}
		body, _ := json.Marshal(runclient.ResponseOf(*res))
		out.EmitID(events.DeriveID(res.RunID, "reply/result"), events.TypeReplyChunk, runclient.Chunk{
			MessageID: events.DeriveID(res.RunID, "reply/result"), SessionID: session, MessageType: typ,
			Content: string(body), EndOfMessage: true, EndOfDialog: true})
	}
}

// sessionProgress is the run's typed progress envelope after a hop.
func sessionProgress(in event.Event, s orch.State) string {
	p := runclient.SessionProgress{SessionID: s.Request.SessionID, RunID: s.Request.RunID,
		ProgressID: fmt.Sprintf("prog-%s-%04d", s.Plan.PlanID, s.Seq), EmittedAt: in.Time().UTC(), Status: s.Plan.Status,
		CurrentSteps: []int{}, BudgetRemaining: s.Remaining()}
	for _, st := range s.Plan.Steps {
		switch st.Status {
		case orch.StepRevised:
			continue
		case orch.StepComplete:
			p.CompletedStepCount++
		case orch.StepRunning, orch.StepAwaitingGate:
			p.CurrentSteps = append(p.CurrentSteps, st.Index)
		}
		p.TotalStepCount++
	}
	if g := s.Gate; g != nil {
		packet := g.Packet()
		p.AwaitingGate = &packet
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// ProgressEvent selects the trace events a streaming caller sees.
func ProgressEvent(name string) bool {
	return strings.HasPrefix(name, "step_") || strings.HasPrefix(name, "plan.") && name != handlers.AuditPlanProjected ||
		name == "routing.decided" || name == "replan.triggered" || name == "react.started" ||
		strings.HasPrefix(name, "budget.") || strings.HasPrefix(name, "guard.") || name == "escalation.raised" ||
		name == "clarification.requested" || strings.HasPrefix(name, "gate.") || name == "run.interrupted" ||
		strings.HasPrefix(name, "supervisor.") || strings.HasPrefix(name, "fanout.") || strings.HasPrefix(name, "fanin.") ||
		strings.HasPrefix(name, "handoff.") || name == "session.handoff.human" || name == "session.turn_limit" ||
		name == "session.continued" || name == "session.refused"
}

// runDeadline stops a run still going at its wall-clock deadline: it
// writes the run into the cancels bucket with the timeout reason, so the
// hop in flight stops (a skill call is abandoned) and the run ends
// TIMEOUT at its next input. A finished run is left alone, and so is one
// a user cancelled first.
func (r *Router) runDeadline(ctx context.Context, ev event.Event, rd orch.RunDeadline) ([]event.Event, error) {
	if r.Cancels == nil {
		return nil, nil
	}
	p, _, err := r.Store.GetPlan(ctx, rd.TenantID, orch.PlanID(rd.RunID))
	switch {
	case err == nil && store.PlanFinished(p.Status):
		return nil, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("handlers: run deadline: %w", err)
	}
	if _, err := r.Cancels.Request(ctx, rd.TenantID, rd.RunID, runctl.Cancel{By: "deadline", At: r.Now().UTC(), Reason: runctl.CancelTimeout}); err != nil {
		return nil, err
	}
	r.Log.Info().Str("run_id", rd.RunID).Str("tenant_id", rd.TenantID).Msg("run deadline passed; stopping it")
	return nil, nil
}

// RouterStore is what the router needs: the step outputs it synthesises
// from, the tenants' souls and the agent definitions runs act as. It
// writes nothing.
type RouterStore interface {
	GetMemory(ctx context.Context, key string) (store.Memory, error)
	// SoulFor is the soul a run of userID sees: the user's, else the
	// tenant's.
	SoulFor(ctx context.Context, tenantID, userID string) (store.Soul, error)
	GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error)
	handlers.DefinitionReader
}
