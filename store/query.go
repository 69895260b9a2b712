package store

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Memory scopes (seed 000 §4): a step output belongs to its session; a
// user's past exchanges and facts to the user, across sessions; a
// tenant's facts to every user of the tenant.
const (
	ScopeSession = "session"
	ScopeUser    = "user"
	ScopeTenant  = "tenant"
)

// MemoryQuery is a similarity search over agent_memory. TenantID is
// required; Scope and UserID, when non-empty, further filter the
// candidates, and so does Within. Hits are ordered by descending cosine
// similarity to Vector. A memory whose ttl_at has passed (at At) is
// never a candidate.
//
// Every backend's QueryMemory answers it with these semantics: the
// candidates are the memories with an embedding of Vector's dimension
// that Match accepts; the TopK most similar are returned, best first,
// ties by key.
type MemoryQuery struct {
	TenantID string
	Scope    string
	UserID   string
	// Within, when non-empty, keeps only the memories one of its
	// selectors accepts: how a run recalls its tenant's facts, its
	// user's memories and its session's in one query.
	Within []MemorySelector
	Vector []float32
	// TopK bounds the number of hits; values <= 0 mean DefaultTopK.
	TopK int
	// At is when expiry is judged; zero means now.
	At time.Time
}

// DefaultTopK is the number of hits returned when MemoryQuery.TopK <= 0.
const DefaultTopK = 10

// MemorySelector selects the memories of one scope of a tenant: its
// facts (ScopeTenant), one user's memories (ScopeUser and UserID) or one
// session's (ScopeSession and SessionID; with UserID, only that user's).
// A memory is selected by its fields and by its key, which is namespaced
// by the same ids (KeyPrefix): the embedded store finds a selector's
// memories by their keys alone.
type MemorySelector struct {
	Scope     string `json:"scope"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// KeyPrefix is the prefix of the keys of the memories s selects in
// tenant: {tenant}:@tenant: (a tenant's facts), {tenant}:@user:{user}:
// (a user's facts and exchanges), {tenant}:{session}: (a session's step
// outputs and context values).
func (s MemorySelector) KeyPrefix(tenant string) string {
	switch s.Scope {
	case ScopeTenant:
		return tenant + ":@tenant:"
	case ScopeUser:
		return tenant + ":@user:" + s.UserID + ":"
	}
	return tenant + ":" + s.SessionID + ":"
}

// Valid reports whether s names what its scope needs: a user for
// ScopeUser, a session for ScopeSession, nothing for ScopeTenant.
func (s MemorySelector) Valid() bool {
	switch s.Scope {
	case ScopeTenant:
		return s.UserID == "" && s.SessionID == ""
	case ScopeUser:
		return s.UserID != "" && s.SessionID == ""
	case ScopeSession:
		return s.SessionID != ""
	}
	return false
}

// selects reports whether s selects m of tenant.
func (s MemorySelector) selects(tenant string, m Memory) bool {
	return m.Scope == s.Scope && (s.UserID == "" || m.UserID == s.UserID) &&
		(s.SessionID == "" || m.SessionID == s.SessionID) && strings.HasPrefix(m.Key, s.KeyPrefix(tenant))
}

// Time is when q judges expiry: At, or now.
func (q MemoryQuery) Time() time.Time {
	if q.At.IsZero() {
		return time.Now()
	}
	return q.At
}

// Match reports whether m is a candidate of q: of q's tenant, scope and
// user, selected by one of Within when set, and not expired at at (see
// Time). The embedding is not checked.
func (q MemoryQuery) Match(m Memory, at time.Time) bool {
	if m.TenantID != q.TenantID || q.Scope != "" && m.Scope != q.Scope || q.UserID != "" && m.UserID != q.UserID ||
		m.Expired(at) {
		return false
	}
	if len(q.Within) == 0 {
		return true
	}
	return slices.ContainsFunc(q.Within, func(s MemorySelector) bool { return s.selects(q.TenantID, m) })
}

// CheckWithin returns an error wrapping ErrInvalidArgument when a
// selector of q.Within is not Valid.
func (q MemoryQuery) CheckWithin() error {
	for _, s := range q.Within {
		if !s.Valid() {
			return fmt.Errorf("store: memory selector %+v: %w", s, ErrInvalidArgument)
		}
	}
	return nil
}

// MemoryHit is one result of a MemoryQuery.
type MemoryHit struct {
	Memory
	// Score is the cosine similarity between the query vector and the
	// memory's embedding.
	Score float32
}

// CompareHits orders hits as QueryMemory returns them: by score
// descending, then by key.
func CompareHits(a, b MemoryHit) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// MemoryRetention is how long a memory of each scope is kept: a write
// sets its ttl_at to its creation time plus its scope's retention
// (TTLAt); queries never return it afterwards and PruneMemory deletes it.
// A retention <= 0 keeps the scope's memories for ever.
type MemoryRetention struct {
	Session time.Duration
	User    time.Duration
	Tenant  time.Duration
}

// Default retentions of the memory scopes.
const (
	DefaultSessionMemoryTTL = 7 * 24 * time.Hour
	DefaultUserMemoryTTL    = 90 * 24 * time.Hour
	DefaultTenantMemoryTTL  = 365 * 24 * time.Hour
)

// DefaultMemoryRetention is the retention of every scope by default.
var DefaultMemoryRetention = MemoryRetention{Session: DefaultSessionMemoryTTL, User: DefaultUserMemoryTTL,
	Tenant: DefaultTenantMemoryTTL}

// TTLAt is the ttl_at of a memory of scope created at created: zero (no
// expiry) when the scope's retention is not positive.
func (r MemoryRetention) TTLAt(scope string, created time.Time) time.Time {
	var d time.Duration
	switch scope {
	case ScopeSession:
		d = r.Session
	case ScopeUser:
		d = r.User
	case ScopeTenant:
		d = r.Tenant
	}
	if d <= 0 || created.IsZero() {
		return time.Time{}
	}
	return created.Add(d).UTC()
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
