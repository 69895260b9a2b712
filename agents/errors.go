package agents

import "fmt"

// Validation error codes: stable, answered by the HTTP API as the error
// code with status 400.
const (
	// CodeNameRequired: the name is missing or blank.
	CodeNameRequired = "name_required"
	// CodeSystemPromptRequired: an agent without instructions.
	CodeSystemPromptRequired = "system_prompt_required"
	// CodeInvalidType: type is not standard, supervisor or router.
	CodeInvalidType = "invalid_type"
	// CodeInvalidStatus: status is not one the kind allows.
	CodeInvalidStatus = "invalid_status"
	// CodeInvalidModel: the model identifier is malformed.
	CodeInvalidModel = "invalid_model"
	// CodeInvalidModelConfig: a model setting is out of range.
	CodeInvalidModelConfig = "invalid_model_config"
	// CodeInvalidTool: a tool name is malformed or repeated.
	CodeInvalidTool = "invalid_tool"
	// CodeInvalidSubAgent: a sub-agent id is malformed, repeated or the
	// agent itself.
	CodeInvalidSubAgent = "invalid_sub_agent"
	// CodeSubAgentsRequired: a supervisor or router without sub-agents.
	CodeSubAgentsRequired = "sub_agents_required"
	// CodeSubAgentsNotAllowed: a standard agent with both steps and
	// sub-agents.
	CodeSubAgentsNotAllowed = "sub_agents_not_allowed"
	// CodeUnknownAgent: a referenced agent is not defined for the tenant.
	CodeUnknownAgent = "unknown_agent"
	// CodeHandoffTooDeep: the handoff chain from the agent is longer than
	// MaxHandoffDepth, or loops.
	CodeHandoffTooDeep = "handoff_too_deep"
	// CodeInvalidSkill: a skill id is malformed or repeated.
	CodeInvalidSkill = "invalid_skill"
	// CodeInvalidSteps: the handoff steps are inconsistent.
	CodeInvalidSteps = "invalid_steps"
	// CodeInvalidMaxTurns: max_turns is out of range.
	CodeInvalidMaxTurns = "invalid_max_turns"
	// CodeInvalidHandoffBehavior: handoff_behavior is not escalate or end.
	CodeInvalidHandoffBehavior = "invalid_handoff_behavior"
	// CodeInvalidLimits: a budget limit is unknown or negative.
	CodeInvalidLimits = "invalid_limits"
	// CodeInvalidAutoApprove: auto_approve names a mode an agent cannot
	// take out of its gates.
	CodeInvalidAutoApprove = "invalid_auto_approve"
	// CodeInvalidHistoryWindow: a history_window setting is out of its
	// bounds.
	CodeInvalidHistoryWindow = "invalid_history_window"
	// CodeFieldTooLong: a text field is longer than its limit.
	CodeFieldTooLong = "field_too_long"
	// CodeAgentRequired: a trigger without an agent.
	CodeAgentRequired = "agent_id_required"
	// CodeInvalidEventType: event_type is not one of EventTypes.
	CodeInvalidEventType = "invalid_event_type"
	// CodeInvalidCondition: a condition's field or value is malformed.
	CodeInvalidCondition = "invalid_condition"
	// CodeInvalidOperator: a condition's operator is not one of Operators.
	CodeInvalidOperator = "invalid_operator"
	// CodeTooManyConditions: more than MaxConditions in a list.
	CodeTooManyConditions = "too_many_conditions"
	// CodeInvalidPriority: priority is out of range.
	CodeInvalidPriority = "invalid_priority"
)

// Error is one validation failure: a stable Code, the JSON Field it
// concerns (dotted, with indexes: "conditions.all[1].operator") and a
// human-readable Message.
type Error struct {
	Code    string `json:"code"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error implements error.
func (e *Error) Error() string { return "agents: " + e.Field + ": " + e.Message }

func invalid(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CodeAgentInactive: a run names an agent that is not active.
const CodeAgentInactive = "agent_inactive"
