package handlers

import (
	"fmt"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// JoinID is the id of a group's group.joined event. It derives from the
// group alone, so whichever delivery joins the group (the aggregator's for
// the last member, or the executor of a group of one) emits the same id
// and the stream keeps one join.
func JoinID(groupID string) string { return events.DeriveID(groupID, "joined") }

// AuditRunQueued names the audit event of a run queued behind another run
// of its session (payload Queued).
const AuditRunQueued = "run.queued"

// SessionState is what a session says of who may answer its next run.
func SessionState(s *store.Session) *orch.SessionState {
	if s == nil {
		return nil
	}
	return &orch.SessionState{Status: s.State, AgentID: s.AgentID, Chain: s.HandoffChain, Reason: s.HandoffReason,
		Stage: s.Stage, Skills: s.LoadedSkills}
}

// Projection is the agent_plans document of a run's plan.
func Projection(run orch.State) store.Plan {
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

func returnSpecJSON(rs orch.ReturnSpec) json.RawMessage {
	if len(rs.Shape) == 0 {
		return nil
	}
	b, _ := json.Marshal(rs)
	return b
}

// AuditPlanProjected names the audit event that gives a run's plan
// projection after a router hop: the hop's state, at its seq.
const AuditPlanProjected = "plan.projected"

// AuditPlanPersisted is the trace's record (seed 000 §10, Layer 1) that a
// plan's projection was taken to the store with a new status: the
// plan.projected of the same hop gives it.
const AuditPlanPersisted = "plan.persisted"

// PlanProjected is the payload of a plan.projected audit event: the plan
// projection of a run at Version (its seq). Plan is the snapshot; absent,
// the projection is that of the run state the event's carrier holds (the
// hop's first output on AGENT, a plan.requested or step.requested whose
// "run" is the hop's state; ProjectionOf), which the trail then need not
// repeat.
type PlanProjected struct {
	Version int64       `json:"version"`
	Plan    *store.Plan `json:"plan,omitempty"`
}

// carriedRun is what a plan projection needs of the run state a message
// carries (orch.RunState's members of the same names); the rest of the
// state is skipped.
type carriedRun struct {
	Run struct {
		Request orch.RunRequest `json:"request"`
		Plan    orch.Plan       `json:"plan"`
		Seq     int64           `json:"seq"`
		Usage   llm.Usage       `json:"usage,omitzero"`
	} `json:"run"`
}

// ProjectionOf is the plan projection of the run state that the
// orchestration message data carries (its "run"), with the state's seq.
func ProjectionOf(data []byte) (store.Plan, int64, error) {
	var c carriedRun
	if err := json.Unmarshal(data, &c); err != nil {
		return store.Plan{}, 0, fmt.Errorf("%w: run state: %v", events.ErrDecode, err)
	}
	r := c.Run
	return Projection(orch.State{Request: r.Request, Plan: r.Plan, Seq: r.Seq, Usage: r.Usage}), r.Seq, nil
}

// AlertEvaluate is the data of alert.evaluate: evaluate the tenant's
// alert rules now.
type AlertEvaluate struct {
	TenantID string `json:"tenant_id"`
}

// Validate checks the tenant.
func (a AlertEvaluate) Validate() error { return orch.ValidateID("tenant_id", a.TenantID) }

// Tenant is the tenant the message must be published for.
func (a AlertEvaluate) Tenant() string { return a.TenantID }

// AlertTrigger is the alert.evaluate the projector schedules when it
// stores a run.finished of tenant at now: at the next minute, one per
// tenant and minute.
func AlertTrigger(in event.Event, tenant string, now time.Time) (event.Event, error) {
	slot := now.Add(time.Minute).Truncate(time.Minute)
	ev, err := events.New(events.DeriveID(tenant, "alerts/"+strconv.FormatInt(slot.Unix(), 10)), events.TypeAlertEvaluate,
		events.Meta{Tenant: tenant, Session: events.MetaOf(in).Session}, AlertEvaluate{TenantID: tenant})
	if err != nil {
		return ev, err
	}
	ev.SetExtension(events.ExtDeliverAt, slot.Format(time.RFC3339Nano))
	return ev, nil
}
