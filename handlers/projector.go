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

// Projector indexes the AUDIT stream into the store's agent_events. The
// document id is the event id, so redelivery never duplicates, and while
// the store is down the events wait in the stream.
type Projector struct {
	Store EventStore
}

// Routes are the events the projector consumes: every audit event.
func (p *Projector) Routes() []events.Route {
	return []events.Route{events.OnPrefix(events.TypeAuditPrefix, p.index)}
}

// Handle is the projector's events.Handler.
func (p *Projector) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(events.RoleProjector, p.Routes()...)(ctx, ev)
}

func (p *Projector) index(ctx context.Context, ev event.Event) ([]event.Event, error) {
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
