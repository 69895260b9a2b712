package handlerstest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TwoSteps is the plan the offline planner makes of RankTask: list the
// outlets, then rank them.
func TwoSteps() []orch.Step {
	return []orch.Step{
		{Index: 1, Task: "List the active outlets, returning only outlet_ids", Skills: []string{"outlet_list"},
			ReturnSpec: orch.ReturnSpec{Shape: json.RawMessage(OutletIDsShape), Reason: "engagement_analytics needs outlet_ids"},
			Status:     orch.StepPending},
		{Index: 2, Task: "Rank the outlets by engagement", Skills: []string{"engagement_analytics"},
			ReturnSpec: orch.ReturnSpec{Shape: json.RawMessage(ResultsShape), Reason: "the final answer is synthesised from it"},
			DependsOn:  []int{1}, Status: orch.StepPending},
	}
}

// Step1Output is a valid output of TwoSteps' step 1.
const Step1Output = `{"outlet_ids":["out-001","out-002"]}`

// Router is a router whose audit outputs go through a projector, as
// the trail its output carries would, so tests can read the plan
// projection.
type Router struct {
	*router.Router
	Projector *projector.Projector
}

// Handle handles ev, then projects the hop's audit events, with the
// output that carries them as the worker would (events.CarrierOf).
func (r *Router) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	outs, err := r.Router.Handle(ctx, ev)
	if err != nil {
		return nil, err
	}
	var carriers Carriers
	carriers.Add(outs)
	for _, o := range outs {
		if strings.HasPrefix(o.Type(), events.TypeAuditPrefix) {
			if _, err := r.Projector.Handle(carriers.Ctx(ctx, o), o); err != nil {
				return nil, err
			}
		}
	}
	return outs, nil
}

// NewRouter is a Router on env with the configuration seeded.
func NewRouter(t *testing.T, env *Env) *Router {
	t.Helper()
	if err := router.SeedConfig(Ctx(t), env.Config); err != nil {
		t.Fatalf("SeedConfig: %v", err)
	}
	return &Router{router.NewRouter(offline.New(), env.Store, env.Config, NopLog), &projector.Projector{Store: env.Store}}
}

// HandleTwice handles ev twice, as a redelivery would, and checks that both
// deliveries produce the same output ids. It returns the first outputs.
func HandleTwice(t *testing.T, h func() ([]event.Event, error)) []event.Event {
	t.Helper()
	first, err := h()
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	second, err := h()
	if err != nil {
		t.Fatalf("Handle (redelivery): %v", err)
	}
	if !slices.Equal(IDs(first), IDs(second)) {
		t.Fatalf("redelivery produced different ids:\n%v\n%v", IDs(first), IDs(second))
	}
	if !slices.Equal(Types(first), Types(second)) {
		t.Fatalf("redelivery produced different types:\n%v\n%v", Types(first), Types(second))
	}
	CheckOutputs(t, first)
	return first
}

// WriteMemory stores a step output the way write_memory would.
func WriteMemory(t *testing.T, env *Env, run orch.RunState, step orch.Step, label, text string) string {
	t.Helper()
	scope := memory.MemoryScope{TenantID: Tenant, SessionID: Session, TaskID: step.TaskID, UserID: User,
		PlanID: run.Plan.PlanID, StepIndex: step.Index}
	key := scope.Key(label)
	if _, err := env.Store.PutMemory(Ctx(t), store.Memory{ID: key, TenantID: Tenant, SessionID: Session,
		TaskID: step.TaskID, Key: key, Text: text, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatalf("PutMemory: %v", err)
	}
	return key
}

// StepOf is the live step idx of p.
func StepOf(t *testing.T, p orch.Plan, idx int) orch.Step {
	t.Helper()
	s := p.Live(idx)
	if s == nil {
		t.Fatalf("plan has no live step %d: %+v", idx, p.Steps)
	}
	return *s
}

// AssertProjection fails t unless the projection of planID has wantStatus
// at wantVersion; it returns it.
func AssertProjection(t *testing.T, env *Env, planID, wantStatus string, wantVersion int64) store.Plan {
	t.Helper()
	p, v, err := env.Store.GetPlan(Ctx(t), Tenant, planID)
	if err != nil {
		t.Fatalf("GetPlan(%s): %v", planID, err)
	}
	if p.Status != wantStatus || v != wantVersion {
		t.Fatalf("projection status %q version %d, want %q version %d", p.Status, v, wantStatus, wantVersion)
	}
	return p
}

// StartRun handles run.requested and returns the plan.requested output.
func StartRun(t *testing.T, r *Router, runID string) (event.Event, orch.PlanRequest) {
	t.Helper()
	ev := NewEvent(t, runID, events.TypeRunRequested, RunRequest(runID, RankTask))
	outs := HandleTwice(t, func() ([]event.Event, error) { return r.Handle(Ctx(t), ev) })
	pr := Only(t, outs, events.TypePlanRequested)
	return pr, Decode[orch.PlanRequest](t, pr)
}

// Propose handles a plan.proposed with steps and returns the step.requested outputs.
func Propose(t *testing.T, r *Router, parent event.Event, run orch.RunState, steps []orch.Step) []event.Event {
	t.Helper()
	ev := ChildEvent(t, parent, "plan.proposed", events.TypePlanProposed, orch.PlanProposal{Run: run, Steps: steps})
	return HandleTwice(t, func() ([]event.Event, error) { return r.Handle(Ctx(t), ev) })
}

// Join handles a group.joined of results and returns the outputs.
func Join(t *testing.T, r *Router, parent event.Event, sr orch.StepRequest, results ...orch.StepResult) []event.Event {
	t.Helper()
	ev := ChildEvent(t, parent, "joined", events.TypeGroupJoined, orch.GroupJoined{Run: sr.Run, Group: sr.Group, Results: results})
	return HandleTwice(t, func() ([]event.Event, error) { return r.Handle(Ctx(t), ev) })
}
