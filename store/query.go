package store

import (
	"slices"
	"strings"
	"time"
)

// MemoryQuery is a similarity search over agent_memory. TenantID is
// required; Scope and UserID, when non-empty, further filter the
// candidates. Hits are ordered by descending cosine similarity to Vector.
type MemoryQuery struct {
	TenantID string
	Scope    string
	UserID   string
	Vector   []float32
	// TopK bounds the number of hits; values <= 0 mean DefaultTopK.
	TopK int
}

// DefaultTopK is the number of hits returned when MemoryQuery.TopK <= 0.
const DefaultTopK = 10

// MemoryHit is one result of a MemoryQuery.
type MemoryHit struct {
	Memory
	// Score is the cosine similarity between the query vector and the
	// memory's embedding.
	Score float32
}

// TraceQuery selects the events of one session or one plan of a tenant.
// TenantID is required and at least one of SessionID and PlanID must be
// set; when both are set, events must match both.
type TraceQuery struct {
	TenantID  string
	SessionID string
	PlanID    string
}

// EventQuery selects events of one tenant for audit queries and health
// figures, newest first. TenantID is required; every other field, when
// set, narrows the result.
//
// Every backend's Events method answers it with these semantics:
//   - an empty TenantID is an error wrapping ErrInvalidArgument;
//   - only events whose tenant_id is TenantID are considered;
//   - an event is kept if Match reports true: its event_type is one of
//     EventTypes (when non-empty), its skill_id equals SkillID (when
//     set), Since <= ts (when Since is non-zero), ts < Until (when Until
//     is non-zero), and large_response is true when LargeResponse points
//     to true, not true when it points to false;
//   - each event id appears once;
//   - events are ordered by CompareNewestFirst: ts descending at full
//     precision, ties by event_id ascending (byte order);
//   - at most EffectiveLimit events are returned: the first ones of that
//     order.
type EventQuery struct {
	TenantID string
	// EventTypes: the event_type is one of them.
	EventTypes []string
	SkillID    string
	// TaskID: the event's task_id is it (a step's task, or for
	// trigger.evaluated the inbound event's id).
	TaskID string
	// Since and Until bound ts: Since <= ts < Until.
	Since, Until time.Time
	// LargeResponse: true selects events whose large_response is true,
	// false those whose large_response is not true.
	LargeResponse *bool
	// Limit bounds the number of events; <= 0 means DefaultEventLimit,
	// and it is capped at MaxEventLimit.
	Limit int
}

// Limits of EventQuery.Limit.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 10_000
)

// EffectiveLimit is the number of events q returns at most: Limit, or
// DefaultEventLimit when Limit <= 0, capped at MaxEventLimit.
func (q EventQuery) EffectiveLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultEventLimit
	case q.Limit > MaxEventLimit:
		return MaxEventLimit
	}
	return q.Limit
}

// Match reports whether ev passes every filter of q, the tenant included.
func (q EventQuery) Match(ev Event) bool {
	switch {
	case ev.TenantID != q.TenantID:
		return false
	case len(q.EventTypes) > 0 && !slices.Contains(q.EventTypes, ev.EventType):
		return false
	case q.SkillID != "" && ev.SkillID != q.SkillID:
		return false
	case q.TaskID != "" && ev.TaskID != q.TaskID:
		return false
	case !q.Since.IsZero() && ev.TS.Before(q.Since):
		return false
	case !q.Until.IsZero() && !ev.TS.Before(q.Until):
		return false
	case q.LargeResponse != nil && ev.LargeResponse != *q.LargeResponse:
		return false
	}
	return true
}

// CompareNewestFirst orders events as EventQuery results are ordered: by
// ts descending, then by event_id ascending. It is a cmp function for
// slices.SortFunc.
func CompareNewestFirst(a, b Event) int {
	if c := b.TS.Compare(a.TS); c != 0 {
		return c
	}
	return strings.Compare(a.EventID, b.EventID)
}

// PlanHealth aggregates the plans of one tenant.
type PlanHealth struct {
	// Plans is the total number of plans.
	Plans int
	// Complete is the number of plans with status "complete".
	Complete int
	// Failed is the number of plans with status "failed".
	Failed int
	// SuccessRate is Complete / (Complete + Failed), i.e. over finished
	// plans only; 0 when no plan has finished.
	SuccessRate float64
	// AvgReplans is the mean replan_count over all plans; 0 when there are
	// no plans.
	AvgReplans float64
	// ByStatus counts plans per status.
	ByStatus map[string]int
}

// ComputePlanHealth aggregates plans into a PlanHealth. It defines the
// aggregation semantics every backend must reproduce.
func ComputePlanHealth(plans []Plan) PlanHealth {
	byStatus := map[string]int{}
	replans := 0
	for _, p := range plans {
		byStatus[p.Status]++
		replans += p.ReplanCount
	}
	return PlanHealthFromCounts(byStatus, replans)
}

// PlanHealthFromCounts builds the PlanHealth of a set of plans from its
// number of plans per status and its total replan_count, for backends
// that aggregate server-side. It takes ownership of byStatus.
func PlanHealthFromCounts(byStatus map[string]int, totalReplans int) PlanHealth {
	if byStatus == nil {
		byStatus = map[string]int{}
	}
	h := PlanHealth{ByStatus: byStatus}
	for _, n := range byStatus {
		h.Plans += n
	}
	h.Complete = byStatus[PlanStatusComplete]
	h.Failed = byStatus[PlanStatusFailed] + byStatus[PlanStatusRejected] + byStatus[PlanStatusExpired]
	if done := h.Complete + h.Failed; done > 0 {
		h.SuccessRate = float64(h.Complete) / float64(done)
	}
	if h.Plans > 0 {
		h.AvgReplans = float64(totalReplans) / float64(h.Plans)
	}
	return h
}

// SessionQuery lists a tenant's sessions (GET /agent/sessions), newest
// first. TenantID is required; Status, AgentID and UserID, when set, keep
// only the sessions whose state (active, handed_off, completed), current
// agent and user equal them.
//
// Every backend's ListSessions answers it with these semantics: an empty
// TenantID is an error wrapping ErrInvalidArgument; only the tenant's
// sessions are considered; they are ordered by CompareSessionsNewestFirst
// (started_at descending, then session_id ascending); at most
// EffectiveLimit are returned, the first ones of that order.
type SessionQuery struct {
	TenantID string
	Status   string
	AgentID  string
	UserID   string
	// Limit bounds the result; values <= 0 mean DefaultSessionLimit and
	// values above MaxSessionLimit mean MaxSessionLimit.
	Limit int
}

// Session listing bounds.
const (
	DefaultSessionLimit = 50
	MaxSessionLimit     = 500
)

// EffectiveLimit is the number of sessions the query returns at most.
func (q SessionQuery) EffectiveLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultSessionLimit
	case q.Limit > MaxSessionLimit:
		return MaxSessionLimit
	}
	return q.Limit
}

// Match reports whether s is one of the sessions q selects.
func (q SessionQuery) Match(s Session) bool {
	return s.TenantID == q.TenantID && (q.Status == "" || s.State == q.Status) && (q.AgentID == "" || s.AgentID == q.AgentID) &&
		(q.UserID == "" || s.UserID == q.UserID)
}

// CompareSessionsNewestFirst orders sessions as ListSessions returns
// them: started_at descending, ties by session_id ascending.
func CompareSessionsNewestFirst(a, b Session) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	return strings.Compare(a.SessionID, b.SessionID)
}
