package handlers

import (
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
)

// Outbox collects the events one input produces. Every id derives from the
// input's id and a key (for an audit event, its name and how many of that
// name the input has emitted), so a redelivered input emits the same ids
// and the streams keep one copy. Counting per name keeps the ids of a
// redelivery whose trail gained or lost an event of another name (a
// context.loaded once the session has history) those of the first.
type Outbox struct {
	In     event.Event
	named  map[string]int // audit events emitted, by name
	outs   []event.Event
	Audits []AuditRecord // every audit call, in order
	err    error
}

// AuditRecord is one audit call of an outbox: name and lineage with its
// payload. A handler that records a side effect keeps the audit events
// the effect produced, so a redelivery that reuses the record emits them
// again (same position, so same derived ids) instead of losing them.
type AuditRecord struct {
	Name    string       `json:"name"`
	Lineage events.Audit `json:"lineage"`
}

// AuditsSince returns the audit calls made after the first n.
func (a *Outbox) AuditsSince(n int) []AuditRecord {
	return append([]AuditRecord(nil), a.Audits[n:]...)
}

// add appends an audit event name ("step_1.started") with its lineage and payload.
func (a *Outbox) Audit(name string, lineage events.Audit, payload any) {
	if a.err != nil {
		return
	}
	if payload != nil {
		b, err := events.MarshalPayload(payload)
		if err != nil {
			a.err = err
			return
		}
		lineage.Payload = b
	}
	a.Audits = append(a.Audits, AuditRecord{Name: name, Lineage: lineage})
	if a.named == nil {
		a.named = map[string]int{}
	}
	a.named[name]++
	// The payload is encoded once: the event's data is built around it.
	ev := events.ChildJSON(a.In, "audit/"+name+"/"+strconv.Itoa(a.named[name]), events.AuditType(name), lineage.AppendJSON(nil))
	if lineage.TaskID != "" {
		events.SetExt(&ev, events.ExtTask, lineage.TaskID)
	}
	a.outs = append(a.outs, ev)
}

// Emit appends an orchestration event derived from the input.
func (a *Outbox) Emit(key string, typ string, data any) {
	if a.err != nil {
		return
	}
	ev, err := events.Child(a.In, key, typ, data)
	if err != nil {
		a.err = err
		return
	}
	a.outs = append(a.outs, ev)
}

// EmitAt appends an orchestration event derived from the input, to be
// delivered at a later time (a scheduled message).
func (a *Outbox) EmitAt(key string, typ string, data any, at time.Time) {
	if a.err != nil {
		return
	}
	ev, err := events.Child(a.In, key, typ, data)
	if err != nil {
		a.err = err
		return
	}
	ev.SetExtension(events.ExtDeliverAt, at.UTC().Format(time.RFC3339Nano))
	a.outs = append(a.outs, ev)
}

// EmitID appends an orchestration event with a given id: one that several
// inputs may produce, such as a group's join, so the streams keep one copy.
func (a *Outbox) EmitID(id, typ string, data any) {
	if a.err != nil {
		return
	}
	ev, err := events.New(id, typ, events.MetaOf(a.In), data)
	if err != nil {
		a.err = err
		return
	}
	a.outs = append(a.outs, ev)
}

// EmitIDAt appends an orchestration event with a given id, to be
// delivered at a later time (a scheduled message).
func (a *Outbox) EmitIDAt(id, typ string, data any, at time.Time) {
	a.EmitID(id, typ, data)
	if a.err == nil {
		a.outs[len(a.outs)-1].SetExtension(events.ExtDeliverAt, at.UTC().Format(time.RFC3339Nano))
	}
}

// Result returns the events built so far, or the first error.
func (a *Outbox) Result() ([]event.Event, error) {
	if a.err != nil {
		return nil, a.err
	}
	return a.outs, nil
}
