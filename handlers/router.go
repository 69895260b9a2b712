package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/store"
)

// MaxReplans bounds replanning per run (seed 000 §3).
const MaxReplans = 3

// Router is the manager: it routes a task to a pattern, asks for a plan,
// dispatches ready steps, advances on every joined group, replans failed
// steps, synthesises the answer and ends every run with one terminal code.
// It never calls a skill.
type Router struct {
	Model llm.Model // routing
	// Synthesiser writes the final answer; nil uses Model.
	Synthesiser llm.Model
	Store       RouterStore
	Config      jetstream.KeyValue // task types; nil uses the defaults
	Log         zerolog.Logger
	Now         func() time.Time
	// Credentials, when set, forgets a run's forwarded API key once the
	// run has ended.
	Credentials *Credentials
	// Replies, when set, streams the answer of runs that asked for it.
	Replies *Replies
}

// NewRouter returns a router.
func NewRouter(model llm.Model, st RouterStore, config jetstream.KeyValue, log zerolog.Logger) *Router {
	return &Router{Model: model, Store: st, Config: config, Log: log, Now: time.Now}
}

// Handle is the router's events.Handler.
func (r *Router) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	switch ev.Type() {
	case events.TypeRunRequested:
		return r.start(ctx, ev)
	case events.TypePlanProposed:
		return r.planned(ctx, ev)
	case events.TypeGroupJoined:
		return r.joined(ctx, ev)
	case events.TypeDeadLettered:
		return r.deadLettered(ctx, ev)
	}
	return nil, events.Permanent(fmt.Errorf("%w: router does not handle %s", events.ErrUnknownType, ev.Type()))
}

// ErrInvalidRequest marks a run request that can never succeed.
var ErrInvalidRequest = errors.New("handlers: invalid run request")

// ValidateRequest checks a run request before it is accepted.
func ValidateRequest(req events.RunRequest) error {
	switch {
	case req.RunID == "":
		return fmt.Errorf("%w: run_id is required", ErrInvalidRequest)
	case !events.ValidToken(req.TenantID):
		return fmt.Errorf("%w: tenant_id must match [A-Za-z0-9_-]{1,64}", ErrInvalidRequest)
	case !events.ValidToken(req.SessionID):
		return fmt.Errorf("%w: session_id must match [A-Za-z0-9_-]{1,64}", ErrInvalidRequest)
	case req.UserID == "" || len(req.UserID) > 128:
		return fmt.Errorf("%w: user_id is required (at most 128 characters)", ErrInvalidRequest)
	case strings.TrimSpace(req.Message) == "":
		return fmt.Errorf("%w: message is empty", ErrInvalidRequest)
	case len(req.Message) > 32<<10:
		return fmt.Errorf("%w: message is longer than 32 KiB", ErrInvalidRequest)
	}
	return nil
}

func (r *Router) start(ctx context.Context, ev event.Event) ([]event.Event, error) {
	var req events.RunRequest
	if err := events.Decode(ev, &req); err != nil {
		return nil, err
	}
	if err := ValidateRequest(req); err != nil {
		return nil, events.Permanent(err)
	}
	tts, err := loadTaskTypes(ctx, r.Config)
	if err != nil {
		return nil, err
	}
	run := events.RunState{Request: req, Seq: 1,
		Plan: events.Plan{PlanID: "plan-" + events.DeriveID(req.RunID, "plan")[:18], Status: events.PlanPlanning, CreatedAt: r.Now().UTC()}}
	out := outbox{in: ev}
	lin := events.Audit{PlanID: run.Plan.PlanID, UserID: req.UserID}
	out.audit("user_message.received", lin, map[string]any{"message_bytes": len(req.Message)})
	rec := llm.Record(r.Model)
	mreq := llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: req.Message, TaskTypes: tts})
	mreq.Schema = llm.RouteSchema
	var dec llm.RouteOutput
	_, err = llm.Structured(ctx, rec, mreq, &dec)
	run.Usage = out.modelCalls(lin, rec)
	if err != nil {
		if code, ok := modelFailure(err); ok {
			return r.finish(ctx, &out, run, code, "routing failed: "+err.Error())
		}
		return nil, fmt.Errorf("handlers: route: %w", err)
	}
	dec = constrainRoute(dec, tts)
	run.TaskType, run.Pattern, run.Routing = dec.TaskType, dec.Pattern, dec.Reason
	if err := r.persist(ctx, run); err != nil {
		return nil, err
	}
	out.audit("routing.decided", lin, map[string]any{"task_type": dec.TaskType, "pattern": dec.Pattern,
		"reason": dec.Reason, "options": taskTypeNames(tts)})
	out.audit("subagent_a.spawned", lin, map[string]any{"mode": "plan"})
	out.emit("plan.requested", events.TypePlanRequested, events.PlanRequest{Run: run})
	return out.result()
}

// constrainRoute keeps the decision inside the configured options: an
// unknown task type becomes the first configured one, an invalid pattern
// the task type's first valid pattern.
func constrainRoute(dec llm.RouteOutput, tts []llm.TaskType) llm.RouteOutput {
	i := slices.IndexFunc(tts, func(t llm.TaskType) bool { return t.Name == dec.TaskType })
	if i < 0 {
		dec.Reason = fmt.Sprintf("model chose unknown task type %q; using %q", dec.TaskType, tts[0].Name)
		i = 0
	}
	dec.TaskType = tts[i].Name
	if !slices.Contains(tts[i].Patterns, dec.Pattern) && len(tts[i].Patterns) > 0 {
		dec.Pattern = tts[i].Patterns[0]
	}
	return dec
}

func taskTypeNames(tts []llm.TaskType) []string {
	names := make([]string, len(tts))
	for i, t := range tts {
		names[i] = t.Name
	}
	return names
}

func (r *Router) planned(ctx context.Context, ev event.Event) ([]event.Event, error) {
	var p events.PlanProposal
	if err := events.Decode(ev, &p); err != nil {
		return nil, err
	}
	run := p.Run
	run.Usage = run.Usage.Add(p.Usage)
	out := outbox{in: ev}
	lin := events.Audit{PlanID: run.Plan.PlanID, UserID: run.Request.UserID}
	if p.Code != "" {
		return r.finish(ctx, &out, run, p.Code, p.Infeasible)
	}
	if p.Infeasible != "" {
		return r.finish(ctx, &out, run, events.CodeImpossible, "plan infeasible: "+p.Infeasible)
	}
	replan := run.Plan.Status == events.PlanReplanning
	run.Plan.Steps = mergeSteps(run.Plan.Steps, p.Steps)
	run.Plan.Status = events.PlanExecuting
	run.Seq++
	if replan {
		out.audit("plan.revised", lin, map[string]any{"revised_steps": stepIndexes(p.Steps), "replan_count": run.Plan.ReplanCount})
	} else {
		out.audit("plan.received", lin, map[string]any{"steps": len(p.Steps)})
	}
	return r.dispatch(ctx, &out, run)
}

// mergeSteps keeps every completed step and replaces the rest with the
// proposed steps: a revision never re-runs completed work.
func mergeSteps(old, proposed []events.Step) []events.Step {
	merged := make([]events.Step, 0, len(old)+len(proposed))
	for _, s := range old {
		if s.Status != events.StepComplete {
			s.Status = events.StepRevised
		}
		merged = append(merged, s)
	}
	for _, s := range proposed {
		s.Status = events.StepPending
		merged = append(merged, s)
	}
	return merged
}

func stepIndexes(steps []events.Step) []int {
	idx := make([]int, len(steps))
	for i, s := range steps {
		idx[i] = s.Index
	}
	return idx
}

// persist writes the plan projection with version = seq. A stale write
// means a newer state is already stored, which happens on redelivery.
func (r *Router) persist(ctx context.Context, run events.RunState) error {
	err := r.Store.PutPlan(ctx, Projection(run), run.Seq)
	if errors.Is(err, store.ErrStale) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("handlers: persist plan: %w", err)
	}
	return nil
}

// Projection is the agent_plans document of a run's plan.
func Projection(run events.RunState) store.Plan {
	p := store.Plan{
		PlanID: run.Plan.PlanID, SessionID: run.Request.SessionID, TenantID: run.Request.TenantID,
		UserID: run.Request.UserID, Status: run.Plan.Status, ReplanCount: run.Plan.ReplanCount,
		CreatedAt: run.Plan.CreatedAt, CompletedAt: run.Plan.CompletedAt, Usage: run.Usage,
	}
	for _, s := range run.Plan.Steps {
		p.Steps = append(p.Steps, store.PlanStep{
			StepIndex: s.Index, Task: s.Task, Skills: s.Skills, ReturnSpec: returnSpecJSON(s.ReturnSpec),
			InputFromStep: s.DependsOn, Status: s.Status, TaskID: s.TaskID, MemoryKey: s.MemoryKey,
			Validated: s.Validated, FailureReason: s.FailureReason, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
		})
	}
	for _, h := range run.Plan.ReplanHistory {
		p.ReplanHistory = append(p.ReplanHistory, store.ReplanRecord(h))
	}
	return p
}

func returnSpecJSON(rs events.ReturnSpec) json.RawMessage {
	if len(rs.Shape) == 0 {
		return nil
	}
	b, _ := json.Marshal(rs)
	return b
}
