package ingress

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/defs"
	"github.com/agentbus/agentbus/metrics"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// InboundEvent is the body of POST /agent/events, and of a message on
// agent.inbound.<tenant>: an event of the tenant's (seed 002's
// message.new, schedule, webhook or manual) that its triggers are
// evaluated against. Data is what the conditions see (dotted fields:
// "message.text" is Data["message"]["text"]). Message is the task of the
// run a matching trigger starts; it defaults to Data's message.text.
// EventID makes the submission idempotent: the same event id of the
// tenant starts one run, whatever the retries. Over HTTP it may be left
// out (one is made up and answered); on NATS it is required.
type InboundEvent struct {
	EventID   string         `json:"event_id,omitempty"`
	EventType string         `json:"event_type"`
	UserID    string         `json:"user_id,omitempty"`
	SessionID string         `json:"session_id"`
	Message   string         `json:"message,omitempty"`
	Data      map[string]any `json:"data,omitempty"`
}

// InboundResult answers POST /agent/events: whether a trigger matched
// and, if one did, the run it started (follow it with GET
// /agent/plans/{plan_id} or the run's stream). EventID is the event's,
// by which GET /agent/events/{event_id} answers its evaluation.
type InboundResult struct {
	EventID   string `json:"event_id"`
	Matched   bool   `json:"matched"`
	Evaluated int    `json:"triggers_evaluated"`
	TriggerID string `json:"trigger_id,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	PlanID    string `json:"plan_id,omitempty"`
	// Duplicate: the event's run had been started already; it is the one
	// named, and nothing new started.
	Duplicate bool `json:"duplicate,omitempty"`
}

// AuditTriggerEvaluated names the audit event that records one
// evaluation of an inbound event against the tenant's triggers (payload
// Evaluation, task_id the inbound event's id, plan_id the run's).
const AuditTriggerEvaluated = "trigger.evaluated"

// Sources of an inbound event (Evaluation.Source).
const (
	SourceHTTP = "http"
	SourceNATS = "nats"
)

// Outcomes of an evaluation (Evaluation.Outcome).
const (
	// OutcomeStarted: a trigger matched and its agent's run was started.
	OutcomeStarted = "started"
	// OutcomeNoMatch: no enabled trigger of the event's type matched.
	OutcomeNoMatch = "no_match"
	// OutcomeAgentInactive: triggers matched, but none of their agents
	// can run (inactive, or gone).
	OutcomeAgentInactive = "agent_inactive"
	// OutcomeSessionRefused: the session takes no run (Code says why:
	// session_handed_off, session_completed, session_agent_mismatch).
	OutcomeSessionRefused = "session_refused"
	// OutcomeLimited: the tenant's request limits refused the run (Code
	// rate_limited or concurrency_limited); on NATS the event is
	// evaluated again after RetryAfterSeconds.
	OutcomeLimited = "limited"
	// OutcomeInvalid: the run a match would start is not a valid request
	// (for example no message).
	OutcomeInvalid = "invalid"
	// OutcomeDuplicate: the event's run was started already (the event
	// was delivered again); RunID names it, and nothing new starts.
	OutcomeDuplicate = "duplicate"
)

// Evaluation is the record of one evaluation of an inbound event: every
// trigger considered in priority order with matched or the check that
// failed, the matches whose agent could not run, the chosen trigger and
// agent, and the run started or why none was.
type Evaluation struct {
	EventID   string              `json:"event_id"`
	EventType string              `json:"event_type"`
	SessionID string              `json:"session_id"`
	Source    string              `json:"source"`
	Triggers  []agents.Considered `json:"triggers"`
	// Skipped are the matches passed over because their agent cannot
	// run, with the agent's refusal code (agent_inactive, unknown_agent).
	Skipped   []SkippedTrigger `json:"skipped,omitempty"`
	TriggerID string           `json:"trigger_id,omitempty"`
	AgentID   string           `json:"agent_id,omitempty"`
	RunID     string           `json:"run_id,omitempty"`
	PlanID    string           `json:"plan_id,omitempty"`
	Outcome   string           `json:"outcome"`
	Code      string           `json:"code,omitempty"`
	Reason    string           `json:"reason,omitempty"`
	// RetryAfterSeconds is how long a limited event waits.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}

// SkippedTrigger is a matching trigger whose agent could not run.
type SkippedTrigger struct {
	TriggerID string `json:"trigger_id"`
	AgentID   string `json:"agent_id"`
	Code      string `json:"code"`
}

// triggered is what startTriggered decided: the evaluation (recorded
// unless Err is set) and how to answer it.
type triggered struct {
	Eval   Evaluation
	Result InboundResult
	// Status is the HTTP status: 202 started, 200 not matched, 409 a
	// session refusal, 429 limited, 400 invalid, 503 unavailable.
	Status        int
	Code, Message string
	RetryAfter    time.Duration
	// Err is a transient failure (store, limits, publish): nothing was
	// decided, nothing is recorded; the event may be submitted again.
	Err error
}

// inboundNamespace derives a run id from a tenant's event id.
var inboundNamespace = uuid.MustParse("0b6f1e58-3c1e-4d55-9a53-8d1f1b6a2c47")

// InboundRunID is the run an event of the tenant starts, whichever path
// (HTTP, NATS) and however many times it arrives.
func InboundRunID(tenant, eventID string) string {
	return uuid.NewSHA1(inboundNamespace, []byte(tenant+"/"+eventID)).String()
}

// validateInbound checks an inbound event and fills its message from
// its data. It returns the code and message of the first violation.
func validateInbound(in *InboundEvent) (code, field, msg string) {
	if in.Message == "" {
		if m, ok := in.Data["message"].(map[string]any); ok {
			in.Message, _ = m["text"].(string)
		}
	}
	switch {
	case !slices.Contains(agents.EventTypes, in.EventType):
		return agents.CodeInvalidEventType, "event_type", "event_type must be one of " + strings.Join(agents.EventTypes, ", ")
	case orch.ValidateID("session_id", in.SessionID) != nil:
		return "invalid_request", "", "session_id must match [A-Za-z0-9_-]{1,64}"
	case in.EventID != "" && !agents.ValidID(in.EventID):
		return "invalid_request", "", "event_id must match [A-Za-z0-9_-]{1,64}"
	case in.UserID != "" && orch.ValidateID("user_id", in.UserID) != nil:
		return "invalid_request", "", "user_id must match [A-Za-z0-9_-]{1,64}"
	}
	return "", "", ""
}

// inboundEvent serves POST /agent/events: it evaluates the tenant's
// enabled triggers of the event's type against its data, in priority
// order, and starts a run as the agent of the first match whose agent is
// active (202). No match answers 200 with matched false. The run is not
// awaited. In an existing session the run continues with the session's
// current agent (agent_id says which); a session handed off to a human
// or completed takes no run (409 session_handed_off, session_completed).
// The evaluation is recorded (GET /agent/events/{event_id}).
func (g *Ingress) inboundEvent(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	var in InboundEvent
	if !g.decodeBody(w, r, &in) {
		return
	}
	user, ok := userScope(w, r, in.UserID)
	if !ok {
		return
	}
	in.UserID = user
	if code, field, msg := validateInbound(&in); code != "" {
		if field != "" {
			defs.WriteInvalid(w, &agents.Error{Code: code, Field: field, Message: msg})
		} else {
			WriteError(w, http.StatusBadRequest, code, msg)
		}
		return
	}
	if in.EventID == "" {
		in.EventID = uuid.NewString()
	}
	t := g.startTriggered(r.Context(), tenant, in, SourceHTTP)
	if t.Err == nil {
		if err := g.recordEvaluation(r.Context(), tenant, in.UserID, t.Eval); err != nil {
			// The run (if any) is started: the answer stands, the record
			// is missing, which the log says.
			g.log.Error().Err(err).Str("tenant_id", tenant).Str("event_id", in.EventID).Msg("record a trigger evaluation")
		}
	}
	switch {
	case t.Status == http.StatusOK || t.Status == http.StatusAccepted:
		WriteJSON(w, t.Status, t.Result)
	case t.Status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(t.Eval.RetryAfterSeconds))
		WriteError(w, t.Status, t.Code, t.Message)
	default:
		WriteError(w, t.Status, t.Code, t.Message)
	}
}

// startTriggered evaluates a valid inbound event of tenant against the
// tenant's triggers and starts the run of the first match whose agent
// can run, with the checks of POST /agent/run: the session's refusals,
// then the request limits. The run's id is the event's (InboundRunID),
// so a retried event is the same run.requested, which the stream's
// duplicate window drops. Both the HTTP and the NATS path call it.
func (g *Ingress) startTriggered(ctx context.Context, tenant string, in InboundEvent, source string) triggered {
	t := triggered{Eval: Evaluation{EventID: in.EventID, EventType: in.EventType, SessionID: in.SessionID, Source: source}}
	t.Result.EventID = in.EventID
	unavailable := func(code string, err error) triggered {
		t.Status, t.Code, t.Message, t.Err = http.StatusServiceUnavailable, code, err.Error(), err
		return t
	}
	triggers, err := defs.Triggers(ctx, g.store, tenant)
	if err != nil {
		g.log.Error().Err(err).Str("tenant_id", tenant).Msg("read triggers")
		return unavailable("store_unavailable", errors.New("the triggers could not be read"))
	}
	t.Eval.Triggers = agents.Evaluate(triggers, in.EventType, in.Data)
	t.Result.Evaluated = len(triggers)
	matched := false
	for _, c := range t.Eval.Triggers {
		if !c.Matched {
			continue
		}
		matched = true
		_, err := handlers.LoadAgent(ctx, g.store, tenant, c.AgentID)
		var refused *agents.Error
		if errors.As(err, &refused) {
			// Its agent cannot run now: the next match may.
			t.Eval.Skipped = append(t.Eval.Skipped, SkippedTrigger{TriggerID: c.TriggerID, AgentID: c.AgentID, Code: refused.Code})
			continue
		}
		if err != nil {
			g.log.Error().Err(err).Str("tenant_id", tenant).Msg("read an agent")
			return unavailable("store_unavailable", errors.New("the agent could not be read"))
		}
		t.Eval.TriggerID, t.Eval.AgentID = c.TriggerID, c.AgentID
		break
	}
	if t.Eval.TriggerID == "" {
		t.Eval.Outcome = OutcomeNoMatch
		if matched {
			t.Eval.Outcome = OutcomeAgentInactive
		}
		t.Status = http.StatusOK
		return t
	}
	t.Result.Matched, t.Result.TriggerID, t.Result.AgentID = true, t.Eval.TriggerID, t.Eval.AgentID
	refuse := func(outcome string, status int, code, msg string) triggered {
		t.Eval.Outcome, t.Eval.Code, t.Eval.Reason = outcome, code, msg
		t.Status, t.Code, t.Message = status, code, msg
		return t
	}
	duplicate := func(runID string) triggered {
		t.Eval.Outcome, t.Eval.RunID, t.Eval.PlanID = OutcomeDuplicate, runID, orch.PlanID(runID)
		t.Result.RunID, t.Result.PlanID, t.Result.Duplicate = t.Eval.RunID, t.Eval.PlanID, true
		t.Status = http.StatusOK
		return t
	}
	// An event delivered again after its run started is that run, even
	// past the stream's duplicate window, and whatever the run did to the
	// session since: its plan is stored.
	runID := InboundRunID(tenant, in.EventID)
	switch _, _, err := g.store.GetPlan(ctx, tenant, orch.PlanID(runID)); {
	case err == nil:
		return duplicate(runID)
	case !errors.Is(err, store.ErrNotFound):
		g.log.Error().Err(err).Str("tenant_id", tenant).Msg("read a plan")
		return unavailable("store_unavailable", errors.New("the event's run could not be looked up"))
	}
	// An existing session continues with its current agent (seed 002
	// step 6); a handed-off or completed one takes no run.
	cont, code, err := g.sessionAgent(ctx, orch.RunRequest{TenantID: tenant, SessionID: in.SessionID})
	switch {
	case code == "store_unavailable":
		return unavailable(code, err)
	case code != "":
		return refuse(OutcomeSessionRefused, StatusOf(code), code, err.Error())
	case cont != "":
		t.Eval.AgentID, t.Result.AgentID = cont, cont
	}
	req := orch.RunRequest{RunID: runID, TenantID: tenant, UserID: in.UserID, SessionID: in.SessionID,
		Message: in.Message, AgentID: t.Eval.AgentID, TriggerID: t.Eval.TriggerID}
	if req.UserID == "" {
		req.UserID = t.Eval.TriggerID // the run is the trigger's, on no user's behalf
	}
	if err := orch.ValidateRequest(req); err != nil {
		return refuse(OutcomeInvalid, http.StatusBadRequest, "invalid_request", err.Error())
	}
	a, err := g.cfg.Limiter.Admit(ctx, tenant, req.RunID)
	switch {
	case err != nil:
		g.log.Error().Err(err).Str("tenant_id", tenant).Msg("request limits")
		return unavailable("unavailable", errors.New("the request limits cannot be read now"))
	case !a.Allowed:
		metrics.RequestLimited(a.Code)
		t.RetryAfter, t.Eval.RetryAfterSeconds = a.RetryAfter, a.RetryAfterSeconds()
		return refuse(OutcomeLimited, http.StatusTooManyRequests, a.Code, a.Message)
	}
	pending, err := g.runs.Submit(ctx, req)
	if err != nil {
		g.release(orch.RunResult{RunID: req.RunID, TenantID: tenant})
		g.log.Error().Err(err).Str("run_id", req.RunID).Msg("publish run.requested for a trigger")
		return unavailable("unavailable", errors.New("the run could not be queued"))
	}
	pending.Close()
	if pending.Duplicate() {
		// The stream held the run's request already: the run is in
		// flight (its lease was held, and stays) or finished before its
		// plan was read (the lease just taken is freed now, since no
		// run.finished will free it).
		if !a.Held {
			g.release(orch.RunResult{RunID: req.RunID, TenantID: tenant})
		}
		d := duplicate(req.RunID)
		d.Status = http.StatusAccepted
		return d
	}
	g.log.Info().Str("run_id", req.RunID).Str("tenant_id", tenant).Str("trigger_id", t.Eval.TriggerID).
		Str("agent_id", t.Eval.AgentID).Str("event_type", in.EventType).Str("source", source).Msg("run started by a trigger")
	t.Eval.Outcome, t.Eval.RunID, t.Eval.PlanID = OutcomeStarted, req.RunID, orch.PlanID(req.RunID)
	t.Result.RunID, t.Result.PlanID = t.Eval.RunID, t.Eval.PlanID
	t.Status = http.StatusAccepted
	return t
}

// recordEvaluation publishes ev as a trigger.evaluated audit event of
// tenant: the projector indexes it into agent_events with task_id the
// inbound event's id (and plan_id the run's, so it is in the run's
// trace). Each evaluation is its own record: a retried or redelivered
// event is evaluated, and recorded, again.
func (g *Ingress) recordEvaluation(ctx context.Context, tenant, userID string, ev Evaluation) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	meta := events.Meta{Tenant: tenant, Session: ev.SessionID, Run: ev.RunID, SourceProcess: "ingress"}
	e, err := events.New(uuid.NewString(), events.AuditType(AuditTriggerEvaluated), meta,
		events.Audit{UserID: userID, PlanID: ev.PlanID, TaskID: ev.EventID, Payload: data})
	if err != nil {
		return err
	}
	return events.Publish(ctx, g.js, e)
}

// EventEvaluations answers GET /agent/events/{event_id}.
type EventEvaluations struct {
	EventID     string               `json:"event_id"`
	Evaluations []RecordedEvaluation `json:"evaluations"`
}

// RecordedEvaluation is one recorded evaluation with when it happened.
type RecordedEvaluation struct {
	Evaluation
	EvaluatedAt time.Time `json:"evaluated_at"`
}

// eventEvaluations serves GET /agent/events/{event_id}: the recorded
// evaluations of the tenant's inbound event, oldest first. An event the
// tenant has no evaluation of (another tenant's included) is 404.
func (g *Ingress) eventEvaluations(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	id := r.PathValue("event_id")
	if !agents.ValidID(id) {
		WriteError(w, http.StatusNotFound, "not_found", "event not found")
		return
	}
	evs, err := g.store.Events(r.Context(), store.EventQuery{TenantID: tenant, EventTypes: []string{AuditTriggerEvaluated},
		TaskID: id, Limit: store.MaxEventLimit})
	if g.storeError(w, err, "events") {
		return
	}
	out := EventEvaluations{EventID: id, Evaluations: []RecordedEvaluation{}}
	for i := len(evs) - 1; i >= 0; i-- { // newest first from the store
		var rec RecordedEvaluation
		if err := json.Unmarshal(evs[i].Payload, &rec.Evaluation); err != nil || rec.EventID != id {
			g.log.Warn().Err(err).Str("event_id", evs[i].EventID).Msg("a trigger.evaluated record that does not decode")
			continue
		}
		rec.EvaluatedAt = evs[i].TS
		out.Evaluations = append(out.Evaluations, rec)
	}
	if len(out.Evaluations) == 0 {
		WriteError(w, http.StatusNotFound, "not_found", "event not found")
		return
	}
	WriteJSON(w, http.StatusOK, out)
}
