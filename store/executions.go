package store

import (
	"strings"
	"time"
)

// IndexExecutions holds Execution documents: one record per finished run
// (seed 002 Execution Record), kept for the execution-record TTL.
const IndexExecutions = "agent_executions"

// DefaultExecutionTTL is how long execution records are kept when the
// deployment configures none.
const DefaultExecutionTTL = 30 * 24 * time.Hour

// DefaultEventRetention is how long agent_events documents are kept by
// default: the embedded store's events stream's age limit, and the
// OpenSearch retention policy's.
const DefaultEventRetention = 30 * 24 * time.Hour

// Execution statuses (seed 002): a run's terminal code mapped by
// ExecutionStatus.
const (
	ExecutionSuccess = "success"
	ExecutionFailed  = "failed"
	ExecutionTimeout = "timeout"
)

// ExecutionStatus maps a run's terminal code to its execution status:
// SUCCESS and PARTIAL_SUCCESS succeeded, TIMEOUT timed out, every other
// code failed.
func ExecutionStatus(terminalCode string) string {
	switch terminalCode {
	case "SUCCESS", "PARTIAL_SUCCESS":
		return ExecutionSuccess
	case "TIMEOUT":
		return ExecutionTimeout
	}
	return ExecutionFailed
}

// Execution is a document of the agent_executions index: what one run
// did and spent. (TenantID, ExecutionID) is its identity; the execution
// id is the run id, so writing a run's record again stores it once.
type Execution struct {
	ExecutionID string `json:"execution_id"`
	TenantID    string `json:"tenant_id"`
	SessionID   string `json:"session_id,omitempty"`
	// AgentID is the agent that answered (the last of HandoffChain after
	// a handoff), empty for a run without an agent.
	AgentID string `json:"agent_id,omitempty"`
	// TriggerID is the trigger that started the run, empty for a run
	// requested through the API.
	TriggerID string `json:"trigger_id,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	// Input and Output are the run's message and answer, clipped to
	// MaxExecutionText bytes.
	Input     string          `json:"input,omitempty"`
	Output    string          `json:"output,omitempty"`
	ToolCalls []ToolCallCount `json:"tool_calls,omitempty"`
	LatencyMS int64           `json:"latency_ms"`
	TokensIn  int             `json:"tokens_in"`
	TokensOut int             `json:"tokens_out"`
	CostUSD   float64         `json:"cost_usd,omitempty"`
	// Status is success, failed or timeout (ExecutionStatus of
	// TerminalCode).
	Status       string `json:"status"`
	TerminalCode string `json:"terminal_code"`
	// ErrorCode and ErrorReason say why a run that did not succeed
	// ended: its terminal code and reason.
	ErrorCode    string    `json:"error_code,omitempty"`
	ErrorReason  string    `json:"error_reason,omitempty"`
	HandoffChain []string  `json:"handoff_chain,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	// ModelCalls and ToolResults are kept only for a tenant that keeps
	// payload records (seed 002's modelRequest, modelResponse and tool
	// results): each model call's request and answer and each tool call's
	// arguments and result, in the order the run made them, as its trace
	// keeps them (masked and clipped, llm.PayloadRecord), at most
	// MaxExecutionPayloadBytes in all; PayloadsClipped says some were
	// left out. They share the record's retention. A record without them
	// has counts only.
	ModelCalls      []ModelCallRecord  `json:"model_calls,omitempty"`
	ToolResults     []ToolResultRecord `json:"tool_results,omitempty"`
	PayloadsClipped bool               `json:"payloads_clipped,omitempty"`
}

// ModelCallRecord is one model call of a run, as a payload record keeps
// it: the task and prompt version, the model that answered, what it was
// asked and what it answered (or the error).
type ModelCallRecord struct {
	Task          string    `json:"task"`
	PromptVersion string    `json:"prompt_version,omitempty"`
	Model         string    `json:"model,omitempty"`
	TaskID        string    `json:"task_id,omitempty"`
	Request       string    `json:"request,omitempty"`
	Response      string    `json:"response,omitempty"`
	Error         string    `json:"error,omitempty"`
	TS            time.Time `json:"ts,omitzero"`
}

// ToolResultRecord is one tool call of a run, as a payload record keeps
// it: the tool, the step's task, its arguments and its result.
type ToolResultRecord struct {
	Name      string    `json:"name"`
	TaskID    string    `json:"task_id,omitempty"`
	Arguments string    `json:"arguments,omitempty"`
	Result    string    `json:"result,omitempty"`
	IsError   bool      `json:"is_error,omitempty"`
	TS        time.Time `json:"ts,omitzero"`
}

// MaxExecutionPayloadBytes bounds the payload records one execution
// record keeps (requests, answers, arguments and results together).
const MaxExecutionPayloadBytes = 128 << 10

// Size is the bytes of the payloads r keeps.
func (r ModelCallRecord) Size() int { return len(r.Request) + len(r.Response) + len(r.Error) }

// Size is the bytes of the payloads r keeps.
func (r ToolResultRecord) Size() int { return len(r.Arguments) + len(r.Result) }

// WithoutPayloads is e without its payload records (a listing leaves
// them out).
func (e Execution) WithoutPayloads() Execution {
	e.ModelCalls, e.ToolResults = nil, nil
	return e
}

// ToolCallCount is how often a run called one tool, and how many of
// those calls failed.
type ToolCallCount struct {
	Name   string `json:"name"`
	Calls  int    `json:"calls"`
	Errors int    `json:"errors,omitempty"`
}

// MaxExecutionText bounds an execution record's input and output.
const MaxExecutionText = 4096

// ExecutionQuery lists a tenant's execution records (GET
// /agent/executions), newest first. TenantID is required; AgentID,
// SessionID, UserID and Status, when set, keep only the records whose
// fields equal them; Since keeps those created at or after it.
//
// Every backend's ListExecutions answers it with these semantics: an
// empty TenantID is an error wrapping ErrInvalidArgument; only the
// tenant's records are considered, and only those younger than the
// backend's TTL (an expired record is never returned, even before it is
// deleted); they are ordered by CompareExecutionsNewestFirst; at most
// EffectiveLimit are returned, the first ones of that order.
type ExecutionQuery struct {
	TenantID  string
	AgentID   string
	SessionID string
	UserID    string
	Status    string
	Since     time.Time
	// Limit bounds the result; <= 0 means DefaultExecutionLimit, above
	// MaxExecutionLimit means MaxExecutionLimit.
	Limit int
}

// Execution listing bounds.
const (
	DefaultExecutionLimit = 50
	MaxExecutionLimit     = 500
)

// EffectiveLimit is the number of records the query returns at most.
func (q ExecutionQuery) EffectiveLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultExecutionLimit
	case q.Limit > MaxExecutionLimit:
		return MaxExecutionLimit
	}
	return q.Limit
}

// Match reports whether e is one of the records q selects (the TTL
// aside).
func (q ExecutionQuery) Match(e Execution) bool {
	return e.TenantID == q.TenantID && (q.AgentID == "" || e.AgentID == q.AgentID) &&
		(q.SessionID == "" || e.SessionID == q.SessionID) && (q.UserID == "" || e.UserID == q.UserID) &&
		(q.Status == "" || e.Status == q.Status) && (q.Since.IsZero() || !e.CreatedAt.Before(q.Since))
}

// CompareExecutionsNewestFirst orders records as ListExecutions returns
// them: created_at descending, ties by execution_id ascending.
func CompareExecutionsNewestFirst(a, b Execution) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ExecutionID, b.ExecutionID)
}
