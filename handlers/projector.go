package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/store"
)

// Projector writes the store's projections from the AUDIT stream: it
// indexes audit events into agent_events (the document id is the event id,
// so redelivery never duplicates) and writes the plan projection of every
// plan.projected event with version = seq, so a stale snapshot, however
// late or reordered, never overwrites a newer one. While the store is down
// the events wait in the stream.
type Projector struct {
	Store ProjectionStore
}

// AuditPlanProjected names the audit event that carries a run's plan
// projection after a router hop.
const AuditPlanProjected = "plan.projected"

// PlanProjected is the payload of a plan.projected audit event.
type PlanProjected struct {
	Version int64      `json:"version"`
	Plan    store.Plan `json:"plan"`
}

// Routes are the events the projector consumes: every audit event.
func (p *Projector) Routes() []events.Route {
	return []events.Route{events.OnPrefix(events.TypeAuditPrefix, p.index)}
}

// Handle is the projector's events.Handler.
func (p *Projector) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(RoleProjector, p.Routes()...)(ctx, ev)
}

func (p *Projector) index(ctx context.Context, ev event.Event) ([]event.Event, error) {
	if events.AuditName(ev.Type()) == AuditPlanProjected {
		return nil, p.project(ctx, ev)
	}
	doc, err := AuditDoc(ev)
	if err != nil {
		return nil, err
	}
	if err := p.Store.AppendEvents(ctx, []store.Event{doc}); err != nil {
		if errors.Is(err, store.ErrSchema) {
			return nil, events.Permanent(err)
		}
		return nil, fmt.Errorf("handlers: index audit event: %w", err)
	}
	return nil, nil
}

// AuditDoc converts an audit event into its agent_events document.
func AuditDoc(ev event.Event) (store.Event, error) {
	var a events.Audit
	if err := events.Decode(ev, &a); err != nil {
		return store.Event{}, err
	}
	m := events.MetaOf(ev)
	payload := a.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	return store.Event{
		EventID: ev.ID(), TenantID: m.Tenant, SessionID: m.Session, PlanID: a.PlanID, TaskID: a.TaskID,
		EventType: events.AuditName(ev.Type()), SkillID: a.SkillID, ScriptHash: a.ScriptHash,
		Payload: payload, TS: ev.Time(),
	}, nil
}

// project writes the plan projection a plan.projected event carries. A
// stale write means a newer snapshot is already stored.
func (p *Projector) project(ctx context.Context, ev event.Event) error {
	var a events.Audit
	if err := events.Decode(ev, &a); err != nil {
		return err
	}
	var pp PlanProjected
	if err := json.Unmarshal(a.Payload, &pp); err != nil {
		return events.Permanent(fmt.Errorf("%w: payload: %v", events.ErrInvalidData, err))
	}
	if pp.Plan.PlanID == "" || pp.Plan.PlanID != a.PlanID || pp.Plan.TenantID != events.MetaOf(ev).Tenant || pp.Version < 1 {
		return events.Permanent(fmt.Errorf("%w: payload: plan %q of tenant %q at version %d does not match the event's plan %q of tenant %q",
			events.ErrInvalidData, pp.Plan.PlanID, pp.Plan.TenantID, pp.Version, a.PlanID, events.MetaOf(ev).Tenant))
	}
	err := p.Store.PutPlan(ctx, pp.Plan, pp.Version)
	switch {
	case err == nil, errors.Is(err, store.ErrStale):
		return nil
	case errors.Is(err, store.ErrSchema):
		return events.Permanent(err)
	}
	return fmt.Errorf("handlers: write plan projection: %w", err)
}
