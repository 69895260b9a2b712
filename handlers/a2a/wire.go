package a2a

import (
	json "github.com/go-json-experiment/json/v1"
)

// The wire types of A2A 0.3 (JSON-RPC 2.0 binding): the subset agentbus
// reads and writes, field names as the protocol's JSON Schema spells them.

// ProtocolVersion is the A2A version the cards declare.
const ProtocolVersion = "0.3.0"

// JSON-RPC and A2A error codes.
const (
	CodeParseError            = -32700
	CodeInvalidRequest        = -32600
	CodeMethodNotFound        = -32601
	CodeInvalidParams         = -32602
	CodeInternal              = -32603
	CodeTaskNotFound          = -32001
	CodeTaskNotCancelable     = -32002
	CodePushNotSupported      = -32003
	CodeUnsupportedOperation  = -32004
	CodeContentTypeNotAllowed = -32005
)

// Task states.
const (
	StateSubmitted     = "submitted"
	StateWorking       = "working"
	StateInputRequired = "input-required"
	StateCompleted     = "completed"
	StateCanceled      = "canceled"
	StateFailed        = "failed"
	StateRejected      = "rejected"
)

// Request is a JSON-RPC request; ID is a string, a number or null.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC response: its result or its error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error. Data, for a refusal of the native API, holds
// its HTTP status and stable code.
type Error struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Data    *ErrorData `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// ErrorData is the native refusal behind an error.
type ErrorData struct {
	Status int    `json:"status,omitempty"`
	Code   string `json:"code,omitempty"`
}

// AgentCard describes an agent: where its JSON-RPC endpoint is, what it
// can do, and how to authenticate.
type AgentCard struct {
	ProtocolVersion    string                    `json:"protocolVersion"`
	Name               string                    `json:"name"`
	Description        string                    `json:"description"`
	URL                string                    `json:"url"`
	PreferredTransport string                    `json:"preferredTransport"`
	Version            string                    `json:"version"`
	Provider           *Provider                 `json:"provider,omitempty"`
	Capabilities       Capabilities              `json:"capabilities"`
	SecuritySchemes    map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	Security           []map[string][]string     `json:"security,omitempty"`
	DefaultInputModes  []string                  `json:"defaultInputModes"`
	DefaultOutputModes []string                  `json:"defaultOutputModes"`
	Skills             []Skill                   `json:"skills"`
}

// Provider is who serves the agent.
type Provider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// Capabilities are the optional parts of the protocol an agent serves.
type Capabilities struct {
	Streaming              bool `json:"streaming"`
	PushNotifications      bool `json:"pushNotifications"`
	StateTransitionHistory bool `json:"stateTransitionHistory"`
}

// SecurityScheme is an OpenAPI security scheme (here: HTTP bearer).
type SecurityScheme struct {
	Type         string `json:"type"`
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat,omitempty"`
	Description  string `json:"description,omitempty"`
}

// Skill is one thing an agent does.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
}

// Message is one turn of a conversation.
type Message struct {
	Kind      string         `json:"kind"`
	MessageID string         `json:"messageId"`
	Role      string         `json:"role"`
	Parts     []Part         `json:"parts"`
	ContextID string         `json:"contextId,omitempty"`
	TaskID    string         `json:"taskId,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Part is a text, data or file part of a message or an artifact.
type Part struct {
	Kind     string          `json:"kind"`
	Text     string          `json:"text,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	File     json.RawMessage `json:"file,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
}

// MarshalJSON writes the fields of the part's kind, each even when empty
// (a text part's text is required).
func (p Part) MarshalJSON() ([]byte, error) {
	type meta = map[string]any
	switch p.Kind {
	case "text":
		return json.Marshal(struct {
			Kind     string `json:"kind"`
			Text     string `json:"text"`
			Metadata meta   `json:"metadata,omitempty"`
		}{p.Kind, p.Text, p.Metadata})
	case "data":
		data := p.Data
		if len(data) == 0 {
			data = json.RawMessage("{}")
		}
		return json.Marshal(struct {
			Kind     string          `json:"kind"`
			Data     json.RawMessage `json:"data"`
			Metadata meta            `json:"metadata,omitempty"`
		}{p.Kind, data, p.Metadata})
	}
	type plain Part
	return json.Marshal(plain(p))
}

// Task is a run as A2A sees it.
type Task struct {
	Kind      string         `json:"kind"`
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatus is a task's state, with the agent's message about it.
type TaskStatus struct {
	State     string   `json:"state"`
	Message   *Message `json:"message,omitempty"`
	Timestamp string   `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name,omitempty"`
	Parts      []Part `json:"parts"`
}

// StatusUpdate is a streamed change of a task's status; Final marks the
// stream's last event.
type StatusUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Final     bool           `json:"final"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// ArtifactUpdate is a streamed piece of an artifact: Append adds its
// parts to the artifact's, LastChunk ends it.
type ArtifactUpdate struct {
	Kind      string   `json:"kind"`
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  Artifact `json:"artifact"`
	Append    bool     `json:"append,omitempty"`
	LastChunk bool     `json:"lastChunk,omitempty"`
}

// SendParams are the params of message/send and message/stream.
type SendParams struct {
	Message       Message         `json:"message"`
	Configuration *SendConfig     `json:"configuration,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// SendConfig is how the caller wants the answer: Blocking (the default)
// waits for the task to end or ask for input.
type SendConfig struct {
	Blocking      *bool `json:"blocking,omitempty"`
	HistoryLength *int  `json:"historyLength,omitempty"`
}

// TaskParams are the params of tasks/get, tasks/cancel and
// tasks/resubscribe.
type TaskParams struct {
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}
