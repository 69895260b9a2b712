package orch

import (
	"errors"
	"fmt"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// Plan states (seed 000 §3.3).
const (
	PlanPending    = "pending"
	PlanPlanning   = "planning"
	PlanExecuting  = "executing"
	PlanReplanning = "replanning"
	PlanComplete   = "complete"
	PlanFailed     = "failed"
)

// Step states.
const (
	StepPending  = "pending"
	StepRunning  = "running"
	StepComplete = "complete"
	StepFailed   = "failed"
	StepRevised  = "revised"
)

// Step outcomes reported by an executor.
const (
	OutcomeComplete          = "complete"
	OutcomeFailed            = "failed"
	OutcomeInsufficient      = "insufficient"
	OutcomeContractViolation = "contract_violation"
	// OutcomeInvalidOutput: the model's output stayed invalid after its
	// repairs; the run ends VALIDATION_FAIL.
	OutcomeInvalidOutput = "invalid_output"
	// OutcomeUnavailable: the model provider was unavailable; the run ends
	// UNAVAILABLE_DEP.
	OutcomeUnavailable = "unavailable"
	// OutcomeCancelled: the run was cancelled before or while the step
	// ran; the run ends USER_CANCEL.
	OutcomeCancelled = "cancelled"
	// OutcomeBudgetExhausted: a call the step needed would have passed
	// the run's budget, so it was not made; the run ends BUDGET_EXHAUSTED.
	OutcomeBudgetExhausted = "budget_exhausted"
	// OutcomeTimedOut: the run's wall clock ran out before a call the
	// step needed; the run ends TIMEOUT.
	OutcomeTimedOut = "timed_out"
	// OutcomeRepeatedCall: the model repeated an identical tool call past
	// the loop guard's threshold; the run ends REPEATED_FAILURE at once.
	OutcomeRepeatedCall = "repeated_call"
	// OutcomePermissionDenied: the Skill Service refused the call, or the
	// model kept calling skills outside its allowed skills; the run ends
	// PERMISSION_DENIED.
	OutcomePermissionDenied = "permission_denied"
	// OutcomeUnsafe: a safety guard stopped the step (a run's secret in
	// tool arguments); the run ends UNSAFE_DETECTION, failing closed.
	OutcomeUnsafe = "unsafe"
	// OutcomeLowConfidence: the step's answer stated a confidence below
	// the run's threshold and was not written; the step gets one
	// reflection pass (a replan), then the run ends LOW_CONFIDENCE.
	OutcomeLowConfidence = "low_confidence"
	// OutcomeSourceConflict: the sources the step observed contradict
	// each other on a fact its task depends on; the step gets one
	// cross-check pass (a replan), then the run ends SOURCE_CONFLICT.
	OutcomeSourceConflict = "source_conflict"
)

// DefaultMinConfidence is the confidence a step's answer must state, when
// it states one, if the run's pattern sets no min_confidence.
const DefaultMinConfidence = 0.5

// MaxPlanSteps bounds every plan (seed 000 §2.2).
const MaxPlanSteps = 10

// RunRequest is the data of run.requested: one user task.
type RunRequest struct {
	RunID     string `json:"run_id"`
	TenantID  string `json:"tenant_id"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	Stream    bool   `json:"stream,omitempty"`
	// KeyForwarded says the caller sent an API key, kept in the
	// credentials bucket; the key itself never travels in an event.
	KeyForwarded bool `json:"key_forwarded,omitempty"`
	// Budget overrides the run's limits per dimension, within its
	// tenant's caps (orch.BudgetPolicy.Limits).
	Budget Vector `json:"budget,omitempty"`
	// AgentID names the tenant's agent definition the run acts as (seed
	// 002); empty runs as no agent.
	AgentID string `json:"agent_id,omitempty"`
	// TriggerID names the trigger that started the run (POST
	// /agent/events); empty for a run requested through the API.
	TriggerID string `json:"trigger_id,omitempty"`
}

// RunState is the whole state of a run. It travels in every orchestration
// message, so any worker can pick up any message; the router alone changes
// it, and bumps Seq each time.
type RunState struct {
	Request  RunRequest `json:"request"`
	TaskType string     `json:"task_type,omitempty"`
	Pattern  string     `json:"pattern,omitempty"`
	Routing  string     `json:"routing_reason,omitempty"`
	// Agent is the definition of the agent the request named, as the run
	// loaded it: its instructions, model settings, tool allow-list and
	// limits.
	Agent *AgentDef `json:"agent,omitempty"`
	// Framing is the task type's domain framing, given to every model of
	// the run; PatternDef is the chosen pattern's definition. Both are
	// recorded as the run saw them, so a replay does not read today's
	// configuration.
	Framing    string         `json:"framing,omitempty"`
	PatternDef domain.Pattern `json:"pattern_def,omitzero"`
	Plan       Plan           `json:"plan"`
	Seq        int64          `json:"seq"`
	Deadline   time.Time      `json:"deadline,omitzero"`
	// Usage totals every model call of the run that the router has been
	// told of: its own, the planner's and those of finished steps.
	Usage domain.Usage `json:"usage,omitzero"`
	// Context is what the run knew of its caller when it started.
	Context RunContext `json:"context,omitzero"`
	// Missing are the steps a deadline cut off: the run answers from the
	// others and ends PARTIAL_SUCCESS, naming them.
	Missing []int `json:"missing_steps,omitempty"`
	// Budget holds the run's resolved limits and what its steps reported
	// spending; the budgets ledger holds what it drew.
	Budget Budget `json:"budget,omitzero"`
	// Gate is the gate the run is parked at, if any.
	Gate *Gate `json:"gate,omitempty"`
	// Approvals are the run's resolved gates: who decided what, when.
	Approvals []Approval `json:"approvals,omitempty"`
	// Interrupt is the id of the last interrupt the run honoured.
	Interrupt string `json:"interrupt,omitempty"`
	// Verdicts are the critic's scores of every finished step, in order;
	// LoopGuardTrips counts the calls the loop guard blocked.
	Verdicts       []StepScore `json:"verdicts,omitempty"`
	LoopGuardTrips int         `json:"loop_guard_trips,omitempty"`
	// Handoffs is the run's agent handoff chain, in order: the run acts
	// as the last one's target (Agent).
	Handoffs []HandoffRecord `json:"handoffs,omitempty"`
	// Tools counts the tool calls of the run's finished steps, by tool
	// name: its execution record's tool calls.
	Tools ToolUses `json:"tools,omitempty"`
	// Clarifications are the questions the run asked its user at clarify
	// gates and the answers it got, in order (Task).
	Clarifications []Clarification `json:"clarifications,omitempty"`
}

// ToolUse counts the calls of one tool and how many of them failed.
type ToolUse struct {
	Calls  int `json:"calls"`
	Errors int `json:"errors,omitempty"`
}

// ToolUses counts tool calls by tool name.
type ToolUses map[string]ToolUse

// Add returns the sum of u and v; neither is changed.
func (u ToolUses) Add(v ToolUses) ToolUses {
	if len(v) == 0 {
		return u
	}
	out := make(ToolUses, len(u)+len(v))
	for k, x := range u {
		out[k] = x
	}
	for k, x := range v {
		cur := out[k]
		out[k] = ToolUse{Calls: cur.Calls + x.Calls, Errors: cur.Errors + x.Errors}
	}
	return out
}

// RunContext is the tenant's soul, the session's recent conversation and
// the long-term memories recalled for the task, loaded once when the run
// is requested and recorded in its state: the planner, the executor and
// the synthesiser read them from there, and a replay sees what the run
// saw, whatever was changed, written or expired since.
type RunContext struct {
	Persona  *domain.Persona         `json:"persona,omitempty"`
	History  []domain.HistoryMessage `json:"history,omitempty"`
	Memories []domain.RecalledMemory `json:"memories,omitempty"`
}

// Plan is the run's plan, with every step's status (seed 000 §2.2, §5).
type Plan struct {
	PlanID        string         `json:"plan_id"`
	Status        string         `json:"status"`
	Steps         []Step         `json:"steps"`
	ReplanCount   int            `json:"replan_count"`
	ReplanHistory []ReplanRecord `json:"replan_history,omitempty"`
	CreatedAt     time.Time      `json:"created_at,omitzero"`
	CompletedAt   time.Time      `json:"completed_at,omitzero"`
}

// Step is one plan step. Index is 1-based and stable across replans.
type Step struct {
	Index         int        `json:"step"`
	Task          string     `json:"task"`
	Skills        []string   `json:"skills"`
	ReturnSpec    ReturnSpec `json:"return_spec"`
	DependsOn     []int      `json:"depends_on,omitempty"`
	Status        string     `json:"status"`
	TaskID        string     `json:"task_id,omitempty"`
	MemoryKey     string     `json:"memory_key,omitempty"`
	Validated     bool       `json:"validated,omitempty"`
	FailureReason string     `json:"failure_reason,omitempty"`
	StartedAt     time.Time  `json:"started_at,omitzero"`
	FinishedAt    time.Time  `json:"finished_at,omitzero"`
	// Loop, when set, makes the step a loop of model turns toward a goal
	// (the ReACT loop, or a supervisor's subagent lane) rather than one
	// contract-bound step.
	Loop *Loop `json:"loop,omitempty"`
	// ModelOnly, set by the planner, declares a step that needs no tool
	// observation: its answer is committed without one. Any other step
	// with skills must ground its answer in a tool observation.
	ModelOnly bool `json:"model_only,omitempty"`
	// Output, once the step is complete, is the value it wrote under
	// MemoryKey when that is small (CarryOutput): the run state carries it,
	// so the steps that depend on it and the answer need not read it back
	// from memory. The memory record stays the output of record.
	Output json.RawMessage `json:"output,omitempty"`
}

// Loop is a step run as its own self-queuing loop: each model turn is one
// message, bounded by MaxTurns. A supervisor lane has its own session id
// (its provenance chain); its siblings share the group that joins them.
type Loop struct {
	MaxTurns  int    `json:"max_turns,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// AgentID is the sub-agent a supervisor agent's lane runs as
	// (domain.AgentDef.LaneAgent).
	AgentID string `json:"agent_id,omitempty"`
}

// LaneAgent is the sub-agent the step runs as, "" for none.
func (s Step) LaneAgent() string {
	if s.Loop == nil {
		return ""
	}
	return s.Loop.AgentID
}

// ReturnSpec is a step's output contract: Shape is a JSON Schema.
type ReturnSpec struct {
	Shape  json.RawMessage `json:"shape"`
	Reason string          `json:"reason,omitempty"`
}

// ReplanRecord is one entry of a plan's replan history.
type ReplanRecord struct {
	Attempt    int       `json:"attempt"`
	Trigger    string    `json:"trigger"`
	FailedStep int       `json:"failed_step"`
	Reason     string    `json:"reason"`
	RevisedAt  time.Time `json:"revised_at"`
}

// PlanRequest is the data of plan.requested. On a replan Failure is the
// step result that triggered it and Run's plan holds the completed steps.
type PlanRequest struct {
	Run     RunState    `json:"run"`
	Failure *StepResult `json:"failure,omitempty"`
}

// PlanProposal is the data of plan.proposed: the proposed steps (on a
// replan, the revised remaining steps only) or an infeasibility signal.
// The router merges the steps into Run's plan.
type PlanProposal struct {
	Run        RunState `json:"run"`
	Steps      []Step   `json:"steps,omitempty"`
	Infeasible string   `json:"infeasible,omitempty"`
	// Code, when set, ends the run with that terminal code and Infeasible
	// as the reason: VALIDATION_FAIL when the model's plan stayed invalid
	// after its repairs, UNAVAILABLE_DEP when the model was unavailable.
	Code string `json:"code,omitempty"`
	// Usage sums the planner's model calls.
	Usage domain.Usage `json:"usage,omitzero"`
	// Spent is what else the planner's hop drew from the run's budget (a
	// reflection pass, retries).
	Spent Vector `json:"spent,omitempty"`
	// Evidence is the structured reason of a Code (a refused budget draw).
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// Group identifies a set of steps dispatched together; the aggregator joins
// it when all Expected members have finished.
type Group struct {
	ID       string `json:"id"`
	Expected int    `json:"expected"`
}

// StepRequest is the data of step.requested and step.iterated: one step of
// a run, and on iterations the turns so far.
type StepRequest struct {
	Run    RunState `json:"run"`
	Step   int      `json:"step"`
	Group  Group    `json:"group"`
	Inputs []string `json:"inputs,omitempty"` // memory keys of the steps it depends on
	// InputData, on a step's later turns, holds its inputs' values as its
	// first turn read them, by memory key, when they are small (at most
	// MaxCarriedInputs bytes in all): a step's inputs are written once,
	// under their lock, before it starts, so a later turn need not read
	// them again. Absent, each turn reads them.
	InputData map[string]json.RawMessage `json:"input_data,omitempty"`
	// Iteration counts the model turns taken so far; Turns holds the
	// recent ones (older turns are compressed into a summary turn, so
	// the message stays bounded however long the loop runs).
	Iteration int    `json:"iteration,omitempty"`
	Turns     []Turn `json:"turns,omitempty"`
	// Repairs counts the consecutive turns whose output was invalid (a
	// final answer off its schema, tool arguments off the tool's input
	// schema); the third ends the step invalid_output.
	Repairs int `json:"repairs,omitempty"`
	// Usage sums the model calls of the step's turns so far.
	Usage domain.Usage `json:"usage,omitzero"`
	// Spent sums what the step's turns drew besides model usage: tool
	// calls, external calls, side effects, retries.
	Spent Vector `json:"spent,omitempty"`
	// Pooled, for a member of a group of several, is what its turns have
	// drawn from the group's pool beyond their share (LaneShare).
	Pooled Vector `json:"pooled,omitempty"`
	// Observed counts the step's successful tool observations so far
	// (kept when old turns are compressed): its answer is grounded only
	// if there is one.
	Observed int `json:"observed,omitempty"`
	// Calls counts each identical tool call (skill and argument hash)
	// the step made: the loop guard blocks one repeated too often.
	Calls map[string]int `json:"calls,omitempty"`
	// Denied counts calls refused for naming a skill outside the step's
	// allowed skills.
	Denied int `json:"denied,omitempty"`
	// Approved, on a step resumed from its gate, is the approval of the
	// call it held: the executor makes that call first.
	Approved *Approved `json:"approved,omitempty"`
	// Steered counts the run's steering messages the step's turns have
	// seen (each is traced once per step).
	Steered int `json:"steered,omitempty"`
	// Tools counts the tool calls the step's turns made so far.
	Tools ToolUses `json:"tools,omitempty"`
	// Tainted names the open-world skill whose output the step observed
	// first, once it has: its side-effecting calls go through a gate
	// unless the tenant's taint policy relaxes it (the taint rule).
	Tainted string `json:"tainted,omitempty"`
}

// MaxCarriedInputs bounds the inputs a step's turn message carries to its
// next turn (StepRequest.InputData).
const MaxCarriedInputs = 16 << 10

// MaxCarriedOutput bounds a step output the run state carries
// (Step.Output), and MaxCarriedOutputs all of them: the state stays
// small however many steps a plan has.
const (
	MaxCarriedOutput  = 4 << 10
	MaxCarriedOutputs = 16 << 10
)

// Turn is one exchange of an executor's loop: a model message, or a skill
// result. Large results are never carried here: the executor stores them and
// keeps a reference.
type Turn struct {
	Role       string          `json:"role"` // assistant | tool | user | summary
	Content    string          `json:"content,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	ToolArgs   json.RawMessage `json:"tool_args,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
}

// StepResult is what an executor reports for one step.
type StepResult struct {
	Step       int       `json:"step"`
	TaskID     string    `json:"task_id"`
	Outcome    string    `json:"outcome"`
	MemoryKey  string    `json:"memory_key,omitempty"`
	Validated  bool      `json:"validated,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Suggestion string    `json:"suggestion,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Usage sums the model calls the step made.
	Usage domain.Usage `json:"usage,omitzero"`
	// Spent sums what else the step drew (tool calls, memory writes …).
	Spent Vector `json:"spent,omitempty"`
	// Evidence is the structured reason of a guard that stopped the
	// step (the budget state, the repeated call, the approval packet); a
	// run it ends carries it as its detail.
	Evidence json.RawMessage `json:"evidence,omitempty"`
	// Parked, with OutcomeAwaitingGate, is what the step resumes with
	// once its call is approved.
	Parked *Parked `json:"parked,omitempty"`
	// Handoff, with OutcomeHandoff, is the handoff the step's model asked
	// for.
	Handoff *Handoff `json:"handoff,omitempty"`
	// Tools counts the tool calls the step made, by tool name.
	Tools ToolUses `json:"tools,omitempty"`
	// Confidence is the confidence the step's answer stated, if any.
	Confidence *float64 `json:"confidence,omitempty"`
	// Output is the value a complete step wrote under MemoryKey, when it
	// is at most MaxCarriedOutput bytes.
	Output json.RawMessage `json:"output,omitempty"`
}

// StepFinished is the data of step.finished.
type StepFinished struct {
	Run    RunState   `json:"run"`
	Group  Group      `json:"group"`
	Result StepResult `json:"result"`
}

// StepJoined is the data of step.joined: the only member of a group of
// one, finished. Its executor joins the group itself, saving the fan-in
// hop; the router takes it as the group's join.
type StepJoined StepFinished

// RunDeadline is the data of run.deadline: delivered when the run's wall
// time is up.
type RunDeadline struct {
	RunID     string `json:"run_id"`
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
}

// GroupDeadline is the data of group.deadline: delivered when a fan-out
// group's deadline passes, it makes the aggregator join the group with
// whatever finished.
type GroupDeadline struct {
	Run   RunState `json:"run"`
	Group Group    `json:"group"`
}

// GroupJoined is the data of group.joined: every member's result, ordered
// by step index. Partial is set when a deadline joined it early.
type GroupJoined struct {
	Run     RunState     `json:"run"`
	Group   Group        `json:"group"`
	Results []StepResult `json:"results"`
	Partial bool         `json:"partial,omitempty"`
}

// RunResult is the data of run.finished: the answer to the caller.
type RunResult struct {
	RunID        string          `json:"run_id"`
	TenantID     string          `json:"tenant_id"`
	SessionID    string          `json:"session_id"`
	PlanID       string          `json:"plan_id,omitempty"`
	Status       string          `json:"status"`
	TerminalCode string          `json:"terminal_code"`
	Response     string          `json:"response"`
	Reason       string          `json:"reason,omitempty"`
	Steps        []Step          `json:"steps,omitempty"`
	Detail       json.RawMessage `json:"detail,omitempty"`
	// Usage totals the run's model calls: tokens, cost and call count.
	Usage domain.Usage `json:"usage,omitzero"`
	// Decision is the critic's final DecisionRecord of the run.
	Decision *DecisionRecord `json:"decision,omitempty"`
	// Answered are the run requests whose messages answered the run's
	// questions (RunState.Answered): their callers get this result.
	Answered []string `json:"answered_by_runs,omitempty"`
}

// ErrInvalidRequest marks a run request that can never succeed.
var ErrInvalidRequest = errors.New("orch: invalid run request")

// ValidateRequest checks a run request before it is accepted: what
// routing needs (Validate), then its content.
func ValidateRequest(req RunRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	switch {
	case !domain.ValidToken(req.SessionID):
		return fmt.Errorf("%w: session_id must match [A-Za-z0-9_-]{1,64}", ErrInvalidRequest)
	case req.UserID == "" || len(req.UserID) > 128:
		return fmt.Errorf("%w: user_id is required (at most 128 characters)", ErrInvalidRequest)
	case strings.TrimSpace(req.Message) == "":
		return fmt.Errorf("%w: message is empty", ErrInvalidRequest)
	case len(req.Message) > 32<<10:
		return fmt.Errorf("%w: message is longer than 32 KiB", ErrInvalidRequest)
	case req.AgentID != "" && !domain.ValidToken(req.AgentID):
		return fmt.Errorf("%w: agent_id must match [A-Za-z0-9_-]{1,64}", ErrInvalidRequest)
	}
	if err := req.Budget.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	return nil
}

// ValidateID checks a tenant or session id: it becomes a subject token, so
// wildcards, dots and separators are refused.
func ValidateID(field, s string) error {
	if !domain.ValidToken(s) {
		return fmt.Errorf("%w: %s must match [A-Za-z0-9_-]{1,64}", ErrInvalidRequest, field)
	}
	return nil
}
