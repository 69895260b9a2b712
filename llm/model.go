package llm

import (
	"context"
	"encoding/json"
	"errors"
)

// Role is the author of a chat message.
type Role string

// Chat roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message. An assistant message may carry tool calls;
// a tool message answers the call named by ToolCallID.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Tool is a tool the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Task names what a request asks of the model. Real providers see it only
// through the prompt; the offline model dispatches on it.
type Task string

// Model tasks.
const (
	TaskRoute      Task = "route"
	TaskPlan       Task = "plan"
	TaskAct        Task = "act"
	TaskSynthesize Task = "synthesize"
	TaskExtract    Task = "extract"
)

// Request is one chat completion request.
type Request struct {
	Task     Task
	System   string
	Messages []Message
	Tools    []Tool
	// Schema, when set, asks for a JSON answer that validates against it.
	Schema json.RawMessage
	// Input is the typed input of Task (RouteInput, PlanInput, ActInput or
	// SynthInput). Prompts are rendered from it; the offline model reads it.
	Input any
}

// Usage is the token usage of one call; it feeds budgets and the audit trail.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Response is the model's answer.
type Response struct {
	Message Message
	Usage   Usage
	Model   string
}

// Model is a chat-completion model.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Sentinel errors of the llm package.
var (
	// ErrInvalidOutput marks structured output that failed its schema after
	// every repair attempt.
	ErrInvalidOutput = errors.New("llm: invalid structured output")
	// ErrBadInput marks a request whose Input does not fit its Task.
	ErrBadInput = errors.New("llm: request input does not fit its task")
)
