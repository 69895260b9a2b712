package agents

import (
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/store"
)

// Trigger event types (seed 002 createTrigger).
const (
	// EventMessageNew is a new inbound message.
	EventMessageNew = "message.new"
	// EventSchedule is a scheduled tick.
	EventSchedule = "schedule"
	// EventWebhook is a call of the tenant's webhook.
	EventWebhook = "webhook"
	// EventManual is a manual start.
	EventManual = "manual"
)

// EventTypes are the event types a trigger may listen for.
var EventTypes = []string{EventMessageNew, EventSchedule, EventWebhook, EventManual}

// Trigger priorities: lower is evaluated (and wins) first.
const (
	// DefaultPriority is the priority of a trigger that sets none.
	DefaultPriority = 100
	// MaxPriority bounds priority (0 is the highest).
	MaxPriority = 1_000_000
)

// TriggerSpec is what a caller writes of a trigger.
type TriggerSpec struct {
	Name        string     `json:"name"`
	Description string     `json:"description,omitempty"`
	AgentID     string     `json:"agent_id"`
	EventType   string     `json:"event_type"`
	Conditions  Conditions `json:"conditions"`
	// Priority orders the matches of one event: lower first. Unset is
	// DefaultPriority.
	Priority *int `json:"priority,omitempty"`
	// Status is active (enabled) or inactive (disabled).
	Status string `json:"status"`
}

// Trigger is a trigger definition as the API answers it.
type Trigger struct {
	TriggerID string `json:"trigger_id"`
	TenantID  string `json:"tenant_id"`
	TriggerSpec
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Normalize fills the defaults: priority 100, status active, and empty
// condition lists rather than null.
func (s *TriggerSpec) Normalize() {
	s.Name = strings.TrimSpace(s.Name)
	if s.Priority == nil {
		p := DefaultPriority
		s.Priority = &p
	}
	if s.Status == "" {
		s.Status = StatusActive
	}
	if s.Conditions.All == nil {
		s.Conditions.All = []Condition{}
	}
	if s.Conditions.Any == nil {
		s.Conditions.Any = []Condition{}
	}
}

// Enabled reports whether the trigger is evaluated.
func (s TriggerSpec) Enabled() bool { return s.Status == StatusActive }

// PriorityValue is the trigger's priority, DefaultPriority when unset.
func (s TriggerSpec) PriorityValue() int {
	if s.Priority == nil {
		return DefaultPriority
	}
	return *s.Priority
}

// Validate checks a normalized spec and returns the first violation. That
// the agent exists for the tenant is the caller's to check (it needs the
// store): CodeUnknownAgent.
func (s TriggerSpec) Validate() *Error {
	if err := text("name", s.Name, MaxNameLen, CodeNameRequired); err != nil {
		return err
	}
	if err := optionalText("description", s.Description, MaxDescriptionLen); err != nil {
		return err
	}
	switch {
	case s.AgentID == "":
		return invalid(CodeAgentRequired, "agent_id", "agent_id is required")
	case !ValidID(s.AgentID):
		return invalid(CodeUnknownAgent, "agent_id", "agent %q is not defined", s.AgentID)
	}
	if err := oneOf(CodeInvalidEventType, "event_type", s.EventType, EventTypes...); err != nil {
		return err
	}
	if err := s.Conditions.Validate(); err != nil {
		return err
	}
	if p := s.PriorityValue(); p < 0 || p > MaxPriority {
		return invalid(CodeInvalidPriority, "priority", "priority must be from 0 to %d", MaxPriority)
	}
	return oneOf(CodeInvalidStatus, "status", s.Status, StatusActive, StatusInactive)
}

// Definition is the trigger as the store keeps it.
func (t Trigger) Definition() (store.Definition, error) {
	spec, err := json.Marshal(t.TriggerSpec)
	if err != nil {
		return store.Definition{}, fmt.Errorf("agents: encode trigger %q: %w", t.TriggerID, err)
	}
	return store.Definition{TenantID: t.TenantID, Kind: store.KindTrigger, ID: t.TriggerID, Name: t.Name, Status: t.Status,
		Version: t.Version, Spec: spec, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}, nil
}

// TriggerOf reads a trigger from its stored definition.
func TriggerOf(d store.Definition) (Trigger, error) {
	if d.Kind != store.KindTrigger {
		return Trigger{}, fmt.Errorf("agents: definition %q is a %s, not a trigger", d.ID, d.Kind)
	}
	t := Trigger{TriggerID: d.ID, TenantID: d.TenantID, Version: d.Version, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if err := json.Unmarshal(d.Spec, &t.TriggerSpec); err != nil {
		return Trigger{}, fmt.Errorf("agents: decode trigger %q: %w", d.ID, err)
	}
	t.Normalize()
	return t, nil
}

// Match returns the enabled triggers of eventType whose conditions hold
// for event, in evaluation order: by priority (lower first), then by
// trigger id, so equal priorities order the same way every time. The
// first is the one to start.
func Match(triggers []Trigger, eventType string, event map[string]any) []Trigger {
	var out []Trigger
	for _, c := range Evaluate(triggers, eventType, event) {
		if c.Matched {
			out = append(out, c.trigger)
		}
	}
	return out
}

// Reasons a trigger did not match (Considered.Failed).
const (
	// FailedDisabled: the trigger is inactive.
	FailedDisabled = "disabled"
	// FailedEventType: the trigger listens for another event type.
	FailedEventType = "event_type"
	// FailedAll: a condition of All does not hold (Considered.Condition
	// says which).
	FailedAll = "all"
	// FailedAny: no condition of Any holds.
	FailedAny = "any"
)

// Considered is one trigger as Evaluate saw it: whether it matched and,
// if not, why (Failed, and for a failed All condition the condition).
type Considered struct {
	TriggerID string     `json:"trigger_id"`
	AgentID   string     `json:"agent_id"`
	Priority  int        `json:"priority"`
	Matched   bool       `json:"matched"`
	Failed    string     `json:"failed,omitempty"`
	Condition *Condition `json:"condition,omitempty"`

	trigger Trigger
}

// Evaluate explains Match: every trigger with whether it matched the
// event and, if not, the first check that failed, in evaluation order
// (priority, then trigger id). It is pure: the same triggers and event
// give the same answer.
func Evaluate(triggers []Trigger, eventType string, event map[string]any) []Considered {
	out := make([]Considered, 0, len(triggers))
	for _, t := range triggers {
		c := Considered{TriggerID: t.TriggerID, AgentID: t.AgentID, Priority: t.PriorityValue(), trigger: t}
		switch {
		case !t.Enabled():
			c.Failed = FailedDisabled
		case t.EventType != eventType:
			c.Failed = FailedEventType
		default:
			c.Failed, c.Condition = t.Conditions.explain(event)
			c.Matched = c.Failed == ""
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Considered) int {
		if c := a.Priority - b.Priority; c != 0 {
			return c
		}
		return strings.Compare(a.TriggerID, b.TriggerID)
	})
	return out
}
