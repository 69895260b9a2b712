package store

import (
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// Index names, one per document type. They are also the names of the
// embedded JSON Schemas used by Validate.
const (
	// IndexMemory holds Memory documents.
	IndexMemory = "agent_memory"
	// IndexPlans holds Plan documents.
	IndexPlans = "agent_plans"
	// IndexEvents holds Event documents.
	IndexEvents = "agent_events"
	// IndexSouls holds Soul documents.
	IndexSouls = "agent_souls"
	// IndexSessions holds Session documents.
	IndexSessions = "agent_sessions"
)

// Indexes returns the names of all indexes in a stable order.
func Indexes() []string {
	return []string{IndexMemory, IndexPlans, IndexEvents, IndexSouls, IndexSessions, IndexDefinitions, IndexExecutions}
}

// Plan statuses accepted by the agent_plans schema.
const (
	// PlanStatusPending is a plan that has been accepted but not planned yet.
	PlanStatusPending = "pending"
	// PlanStatusPlanning is a plan whose steps are being produced.
	PlanStatusPlanning = "planning"
	// PlanStatusExecuting is a plan whose steps are running.
	PlanStatusExecuting = "executing"
	// PlanStatusReplanning is a plan being revised after a step failed.
	PlanStatusReplanning = "replanning"
	// PlanStatusComplete is a plan that finished successfully.
	PlanStatusComplete = "complete"
	// PlanStatusFailed is a plan that finished unsuccessfully.
	PlanStatusFailed = "failed"
	// PlanStatusAwaitingGate is a run parked at an approval gate.
	PlanStatusAwaitingGate = "awaiting_gate"
	// PlanStatusPaused is a run parked by an interrupt.
	PlanStatusPaused = "paused"
	// PlanStatusRejected is a run ended because its gate was denied.
	PlanStatusRejected = "rejected"
	// PlanStatusExpired is a run ended because its gate expired.
	PlanStatusExpired = "expired"
)

// PlanFinished reports whether a plan status is terminal: the run ended.
func PlanFinished(status string) bool {
	switch status {
	case PlanStatusComplete, PlanStatusFailed, PlanStatusRejected, PlanStatusExpired:
		return true
	}
	return false
}

// Plan step statuses accepted by the agent_plans schema.
const (
	// StepStatusPending is a step that has not started.
	StepStatusPending = "pending"
	// StepStatusRunning is a step that is executing.
	StepStatusRunning = "running"
	// StepStatusComplete is a step that finished successfully.
	StepStatusComplete = "complete"
	// StepStatusFailed is a step that finished unsuccessfully.
	StepStatusFailed = "failed"
	// StepStatusRevised is a step superseded by a replan.
	StepStatusRevised = "revised"
	// StepStatusAwaitingGate is a step whose call waits for an approval.
	StepStatusAwaitingGate = "awaiting_gate"
)

// Version is the optimistic-concurrency token of a Memory document. In
// OpenSearch it is the (seq_no, primary_term) pair; in the embedded backend
// SeqNo is the KV revision and PrimaryTerm is always 1. The zero Version
// means "no expectation" (unconditional write).
type Version struct {
	// SeqNo is the OpenSearch _seq_no or the embedded KV revision.
	SeqNo int64
	// PrimaryTerm is the OpenSearch _primary_term (1 in embedded).
	PrimaryTerm int64
}

// IsZero reports whether v is the zero Version.
func (v Version) IsZero() bool { return v == Version{} }

// Memory is a document of the agent_memory index. Text holds the value
// (agentbus stores JSON text there). Key is the document identity used by
// GetMemory and the conditional writes.
type Memory struct {
	ID          string    `json:"id"`
	TenantID    string    `json:"tenant_id"`
	SessionID   string    `json:"session_id,omitempty"`
	TaskID      string    `json:"task_id,omitempty"`
	UserID      string    `json:"user_id,omitempty"`
	Scope       string    `json:"scope,omitempty"`
	Key         string    `json:"key"`
	Text        string    `json:"text"`
	Embedding   []float32 `json:"embedding,omitempty"`
	Source      string    `json:"source,omitempty"`
	StepIndex   int       `json:"step_index,omitempty"`
	PlanID      string    `json:"plan_id,omitempty"`
	LockedBy    string    `json:"locked_by,omitempty"`
	LockExpires time.Time `json:"lock_expires,omitzero"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
	TTLAt       time.Time `json:"ttl_at,omitzero"`

	// Version is the concurrency token; it is never serialised.
	Version Version `json:"-"`
}

// Expired reports whether m's ttl_at is set and not after at: an
// expired memory is never returned by a query and is deleted by
// PruneMemory.
func (m Memory) Expired(at time.Time) bool { return !m.TTLAt.IsZero() && !m.TTLAt.After(at) }

// Plan is a document of the agent_plans index: the projection of a plan's
// current state.
type Plan struct {
	PlanID        string         `json:"plan_id"`
	SessionID     string         `json:"session_id"`
	TenantID      string         `json:"tenant_id"`
	UserID        string         `json:"user_id,omitempty"`
	Status        string         `json:"status"`
	ReplanCount   int            `json:"replan_count,omitempty"`
	CreatedAt     time.Time      `json:"created_at,omitzero"`
	CompletedAt   time.Time      `json:"completed_at,omitzero"`
	Steps         []PlanStep     `json:"steps,omitempty"`
	ReplanHistory []ReplanRecord `json:"replan_history,omitempty"`
	// Usage totals the run's model calls so far.
	Usage domain.Usage `json:"usage,omitzero"`
}

// PlanStep is one step of a Plan.
type PlanStep struct {
	StepIndex     int             `json:"step_index"`
	Task          string          `json:"task,omitempty"`
	Skills        []string        `json:"skills,omitempty"`
	ReturnSpec    json.RawMessage `json:"return_spec,omitempty"`
	InputFromStep []int           `json:"input_from_step,omitempty"`
	Status        string          `json:"status,omitempty"`
	TaskID        string          `json:"task_id,omitempty"`
	MemoryKey     string          `json:"memory_key,omitempty"`
	Validated     bool            `json:"validated,omitempty"`
	FailureReason string          `json:"failure_reason,omitempty"`
	StartedAt     time.Time       `json:"started_at,omitzero"`
	FinishedAt    time.Time       `json:"finished_at,omitzero"`
}

// ReplanRecord records one replanning of a Plan.
type ReplanRecord struct {
	Attempt    int       `json:"attempt"`
	Trigger    string    `json:"trigger,omitempty"`
	FailedStep int       `json:"failed_step"`
	Reason     string    `json:"reason,omitempty"`
	RevisedAt  time.Time `json:"revised_at,omitzero"`
}

// Event is a document of the agent_events index. EventID is the document
// identity: appending the same EventID twice stores it once.
type Event struct {
	EventID    string          `json:"event_id"`
	TenantID   string          `json:"tenant_id"`
	SessionID  string          `json:"session_id,omitempty"`
	PlanID     string          `json:"plan_id,omitempty"`
	TaskID     string          `json:"task_id,omitempty"`
	EventType  string          `json:"event_type"`
	SkillID    string          `json:"skill_id,omitempty"`
	ScriptHash string          `json:"script_hash,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	TS         time.Time       `json:"ts,omitzero"`

	// Queryable figures, copied from the payload of the events that have
	// them (skill.called, model.called, subagent.finish, run.finished):
	// zero when the event has none.

	// Outcome is a run's terminal code (run.finished), a step's outcome
	// (subagent.finish), or ok / error (skill.called, model.called).
	Outcome string `json:"outcome,omitempty"`
	// TaskType is the run's task type (run.finished).
	TaskType string `json:"task_type,omitempty"`
	// Replans counts the run's replans (run.finished).
	Replans int `json:"replans,omitempty"`
	// DurationMS is how long the call or the step took.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// InputBytes and ResponseBytes size a skill call's arguments and
	// response; LargeResponse says the response took the large-response
	// path.
	InputBytes    int  `json:"input_size_bytes,omitempty"`
	ResponseBytes int  `json:"response_size_bytes,omitempty"`
	LargeResponse bool `json:"large_response,omitempty"`
	// InputTokens, OutputTokens and CostUSD are a model call's usage, or
	// a run's total (run.finished).
	InputTokens  int     `json:"input_tokens,omitempty"`
	OutputTokens int     `json:"output_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// Soul is a document of the agent_souls index: the persona and policies of
// an agent for a tenant (and optionally a user).
type Soul struct {
	ID        string          `json:"id"`
	TenantID  string          `json:"tenant_id"`
	UserID    string          `json:"user_id,omitempty"`
	Key       string          `json:"key,omitempty"`
	Persona   Persona         `json:"persona,omitzero"`
	Policies  json.RawMessage `json:"policies,omitempty"`
	UpdatedAt time.Time       `json:"updated_at,omitzero"`
}

// Persona is the presentation part of a Soul.
type Persona struct {
	Name         string `json:"name,omitempty"`
	SystemPrompt string `json:"system_prompt,omitempty"`
	Tone         string `json:"tone,omitempty"`
	Language     string `json:"language,omitempty"`
}

// Session is a document of the agent_sessions index.
type Session struct {
	SessionID  string           `json:"session_id"`
	TenantID   string           `json:"tenant_id"`
	UserID     string           `json:"user_id,omitempty"`
	State      string           `json:"state,omitempty"`
	StartedAt  time.Time        `json:"started_at,omitzero"`
	LastActive time.Time        `json:"last_active,omitzero"`
	Messages   []SessionMessage `json:"messages,omitempty"`
	// AgentID is the session's current agent, the one that answered
	// last (seed 002 Agent Session); ParentAgentID the agent that handed
	// the conversation to it, HandoffDepth the handoffs that took it
	// there and HandoffReason the last one's reason.
	AgentID       string `json:"agent_id,omitempty"`
	ParentAgentID string `json:"parent_agent_id,omitempty"`
	HandoffDepth  int    `json:"handoff_depth,omitempty"`
	HandoffReason string `json:"handoff_reason,omitempty"`
	// HandoffChain is the session's agents in handoff order, the
	// original first and the current last (empty before a handoff): a
	// new run of the session continues as the current agent with this
	// chain, so depth and cycle limits hold across runs.
	HandoffChain []string `json:"handoff_chain,omitempty"`
	// TurnCount counts the agent turns the session had: the runs an
	// agent answered.
	TurnCount int `json:"turn_count,omitempty"`
	// Stage is the Handoffs-pattern stage the current agent is in and
	// LoadedSkills the skills it loaded (seed 002): the session's next
	// run continues there.
	Stage        string   `json:"stage,omitempty"`
	LoadedSkills []string `json:"loaded_skills,omitempty"`
	// Handoff, while State is handed_off, is the packet a human replies
	// to.
	Handoff *SessionHandoff `json:"handoff,omitempty"`
	// Clarify, while a run of the session waits at a clarify gate, is
	// that run's question: the session's next message answers it.
	Clarify *SessionClarify `json:"clarify,omitempty"`
	// EndedAt is when the session was completed, EndedBy the run that
	// completed it.
	EndedAt time.Time `json:"ended_at,omitzero"`
	EndedBy string    `json:"ended_by,omitempty"`
}

// SessionHandoff is the packet of a session handed to a human: the run
// waiting for the reply and its gate, why, how urgent, the conversation's
// summary, the relevant context and the agents involved.
type SessionHandoff struct {
	RunID    string          `json:"run_id"`
	GateID   string          `json:"gate_id"`
	Reason   string          `json:"reason"`
	Priority string          `json:"priority,omitempty"`
	Summary  string          `json:"summary,omitempty"`
	Context  json.RawMessage `json:"context,omitempty"`
	Agents   []string        `json:"agents,omitempty"`
	Trigger  string          `json:"trigger,omitempty"`
	At       time.Time       `json:"at,omitzero"`
}

// SessionClarify is the question a run of a session waits for an answer
// to: the run, its gate, the question and when it was asked.
type SessionClarify struct {
	RunID    string    `json:"run_id"`
	GateID   string    `json:"gate_id"`
	Question string    `json:"question"`
	At       time.Time `json:"at,omitzero"`
}

// SessionMessage is one message of a Session transcript.
type SessionMessage struct {
	MsgID   string    `json:"msg_id,omitempty"`
	Role    string    `json:"role,omitempty"`
	Content string    `json:"content,omitempty"`
	TS      time.Time `json:"ts,omitzero"`
}
