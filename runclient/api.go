package runclient

import (
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// Request is the body of POST /agent/run.
type Request struct {
	TenantID  string `json:"tenant_id"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	Stream    bool   `json:"stream"`
	// Budget lowers (or, within the tenant's caps, raises) the run's
	// limits per dimension: {"tool_calls": 10, "cost_usd": 0.5}.
	Budget orch.Vector `json:"budget,omitempty"`
	// AgentID names the tenant's agent the run acts as (seed 002): its
	// instructions, model settings, tool allow-list and limits.
	AgentID string `json:"agent_id,omitempty"`
}

// Response is the answer of POST /agent/run: the result of the run, as the
// synchronous body and as the content of a stream's last chunk.
type Response struct {
	RunID        string          `json:"run_id"`
	Response     string          `json:"response"`
	PlanID       string          `json:"plan_id"`
	Status       string          `json:"status"`
	TerminalCode string          `json:"terminal_code"`
	Steps        []orch.Step     `json:"steps,omitempty"`
	Detail       json.RawMessage `json:"detail,omitempty"`
	// Usage totals the run's model calls: tokens, cost and call count.
	Usage llm.Usage `json:"usage"`
}

// ResponseOf is the answer to the caller of a finished run.
func ResponseOf(res orch.RunResult) Response {
	return Response{RunID: res.RunID, Response: res.Response, PlanID: res.PlanID, Status: res.Status,
		TerminalCode: res.TerminalCode, Steps: res.Steps, Detail: res.Detail, Usage: res.Usage}
}

// result is the run result an answer carries, with the identity of the
// request it answers.
func (r Response) result(req orch.RunRequest) orch.RunResult {
	return orch.RunResult{RunID: r.RunID, TenantID: req.TenantID, SessionID: req.SessionID, PlanID: r.PlanID,
		Status: r.Status, TerminalCode: r.TerminalCode, Response: r.Response, Steps: r.Steps, Detail: r.Detail,
		Usage: r.Usage}
}

// StatusCancelling is the status of a run whose cancel was accepted.
const StatusCancelling = "cancelling"

// CancelResponse is the answer of POST /agent/runs/{run_id}/cancel: the
// run and its plan, and StatusCancelling. The run stops before its next
// hop and ends USER_CANCEL, unless it finishes first.
type CancelResponse struct {
	RunID  string `json:"run_id"`
	PlanID string `json:"plan_id"`
	Status string `json:"status"`
}

// Run statuses of the control endpoints' answers, besides the plan's.
const (
	StatusResuming     = "resuming"
	StatusInterrupting = "interrupting"
	StatusSteered      = "steered"
)

// ApprovalRequest is the body of POST
// /agent/runs/{run_id}/approvals/{gate_id}: "approve" or "deny" (also
// "approved", "rejected"), with an optional comment recorded with the
// approver. Approving an elicitation gate answers its question: Content
// is the answer (a JSON object the question's requested_schema accepts;
// properties left out take the schema's defaults), or, for a gate that
// holds several questions, Answers gives each by step. Approving a
// clarify gate answers the run's question: Content is the answer (a JSON
// string, or any JSON value taken as its text). Approving a budget gate
// extends the run's budget: Extend adds its amounts to the run's limits,
// per dimension, within the tenant's caps ({"tool_calls": 10}).
type ApprovalRequest struct {
	Decision string                  `json:"decision"`
	Comment  string                  `json:"comment,omitempty"`
	Content  json.RawMessage         `json:"content,omitempty"`
	Answers  map[int]json.RawMessage `json:"answers,omitempty"`
	Extend   orch.Vector             `json:"extend,omitempty"`
}

// SteerRequest is the body of POST /agent/runs/{run_id}/steer: a user
// message every later model turn of the run sees.
type SteerRequest struct {
	Message string `json:"message"`
}

// ControlResponse answers the run-control endpoints (approvals, steer,
// interrupt, resume): the run, its plan, what happened and, for a gate,
// its decision and who made it.
type ControlResponse struct {
	RunID    string `json:"run_id"`
	PlanID   string `json:"plan_id"`
	Status   string `json:"status"`
	GateID   string `json:"gate_id,omitempty"`
	Decision string `json:"decision,omitempty"`
	By       string `json:"by,omitempty"`
}

// ChunkProgress is the message type of a run's typed progress envelope
// (SessionProgress), one per router hop of a run that streams.
const ChunkProgress = "session_progress"

// SessionProgress is a run's typed progress envelope (seed 004): where it
// is, what it has left, and the gate it waits at, if any.
type SessionProgress struct {
	SessionID          string           `json:"session_id"`
	RunID              string           `json:"run_id"`
	ProgressID         string           `json:"progress_id"`
	EmittedAt          time.Time        `json:"emitted_at"`
	Status             string           `json:"status"`
	CurrentSteps       []int            `json:"current_steps"`
	CompletedStepCount int              `json:"completed_step_count"`
	TotalStepCount     int              `json:"total_step_count"`
	BudgetRemaining    orch.Vector      `json:"budget_remaining,omitempty"`
	AwaitingGate       *orch.GatePacket `json:"awaiting_gate"`
}

// ChunkAwaitingGate is the message type of the chunk that says a run
// waits at a gate; its content is the gate's approval packet.
const ChunkAwaitingGate = "awaiting_gate"

// ChunkToolProgress is the message type of a skill's progress during a
// step of a run that streams (the Skill Service's notifications/progress):
// its content is a ToolProgress, and each call's reports are one message.
const ChunkToolProgress = "tool_progress"

// ToolProgress is one progress report of a skill call. Total is 0 when
// the skill does not know it.
type ToolProgress struct {
	RunID     string  `json:"run_id"`
	StepIndex int     `json:"step_index"`
	SkillID   string  `json:"skill_id"`
	CallID    string  `json:"call_id,omitempty"`
	Progress  float64 `json:"progress"`
	Total     float64 `json:"total,omitempty"`
	Message   string  `json:"message,omitempty"`
}

// ChunkThought is the message type of what an executor's model said
// while it called tools in a step of a run that streams (seed 001): its
// content is the model's text, one message per turn.
const ChunkThought = "thought"

// ChunkObservation is the message type of a tool result a step of a run
// that streams observed (seed 001): its content is an Observation, one
// message per call.
const ChunkObservation = "observation"

// Observation is one tool result of a step, as a streaming caller sees
// it: the result's first MaxObservationBytes, Truncated when it had more.
type Observation struct {
	RunID     string `json:"run_id"`
	StepIndex int    `json:"step_index"`
	SkillID   string `json:"skill_id"`
	CallID    string `json:"call_id,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	Result    string `json:"result"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MaxObservationBytes bounds the result an observation chunk carries.
const MaxObservationBytes = 2000

// Chunk is one piece of a streamed run (seed 001 streaming protocol), as
// the REPLY stream carries it and the ingress forwards it as a server-sent
// event: chunks of one message share MessageID.
type Chunk struct {
	MessageID    string `json:"message_id"`
	SessionID    string `json:"session_id"`
	MessageType  string `json:"message_type"` // progress | session_progress | thought | observation | tool_progress | answer | awaiting_gate | result | error
	Content      string `json:"content"`
	EndOfMessage bool   `json:"end_of_message"`
	EndOfDialog  bool   `json:"end_of_dialog"`
}

// APIError is the body of every HTTP error of the ingress: a stable code
// and a message.
type APIError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}
