package llm

import (
	"context"
	"errors"
	"net/http"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/fault"
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

// Tasks are every model task; each has a system prompt.
var Tasks = []Task{TaskRoute, TaskPlan, TaskAct, TaskSynthesize, TaskExtract, TaskSupervise, TaskReview, TaskClassify, TaskSummarize}

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
	// PromptVersion names the system prompt's file and version
	// ("route@v3"); it is recorded with the call.
	PromptVersion string
	// Stream, when set, receives the answer's text as it is generated, in
	// order; the Response still carries the whole answer. A provider that
	// cannot stream calls it once with the whole text.
	Stream func(delta string)
	// MaxTokens, when set, caps the answer's output tokens below the
	// provider's configured maximum: the run's budget reserved no more.
	MaxTokens int
	// Repair marks a call that repeats a rejected answer: it draws on the
	// run's retry budget.
	Repair bool
	// Model, Temperature, TopP and Stop are the sampling settings of the
	// agent a run acts as (see WithSettings). Model is the model the agent
	// asks for: a provider uses it only when it serves it (ResolveModel),
	// else its configured model. Temperature and TopP, when set, replace
	// the configured temperature and the provider default; Stop ends the
	// answer at any of its sequences.
	Model       string
	Temperature *float64
	TopP        *float64
	Stop        []string
}

// ResolveModel is the model id a provider configured with c sends for a
// call asking for requested: the configured model when the request asks
// for none or for it; the id requested maps to in c.Models (an alias map
// of the models the deployment's provider serves); otherwise the
// configured model, so an agent naming a model its deployment does not
// serve still runs (the answering model is recorded as Response.Model).
func (c ProviderConfig) ResolveModel(requested string) string {
	if requested == "" || requested == c.Model {
		return c.Model
	}
	if id, ok := c.Models[requested]; ok && id != "" {
		return id
	}
	return c.Model
}

// TemperatureFor is the temperature a call sends: the request's, else the
// configured one (nil leaves the provider default).
func (c ProviderConfig) TemperatureFor(req Request) *float64 {
	if req.Temperature != nil {
		return req.Temperature
	}
	return c.Temperature
}

// CapTokens is the output-token limit of a call: the provider's
// configured maximum, lowered to the request's when it sets one.
func CapTokens(configured, requested int) int {
	if requested > 0 && requested < configured {
		return requested
	}
	return configured
}

// EstimateInputTokens estimates the input tokens of req at about four
// bytes per token: the system prompt, the messages and the typed input.
// Budgets reserve it before a call; the offline model reports it.
func EstimateInputTokens(req Request) int {
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	// The input's encoding is counted as it is written, not kept.
	var n byteCount
	if err := jsonv2.MarshalWrite(&n, req.Input, json.DefaultOptionsV1()); err == nil {
		in += int(n)
	}
	return in/4 + 1
}

// byteCount is an io.Writer that counts what is written to it.
type byteCount int

func (n *byteCount) Write(p []byte) (int, error) {
	*n += byteCount(len(p))
	return len(p), nil
}

// Response is the model's answer. Providers report token counts and the
// model id the server answered with; Priced fills in the cost, Metered the
// latency and the call count.
type Response struct {
	Message Message
	Usage   Usage
	Model   string
	// Provider names the provider that answered: offline, openai,
	// anthropic or bedrock (the fallback may answer for another).
	Provider string
	Latency  time.Duration
	// FallbackReason is set when the fallback model answered because the
	// configured provider was unavailable.
	FallbackReason string
	// StructuredMode is how the provider asked for the structured answer
	// or the tool calls of this call (see llm/openai's modes); "" when the
	// request asked for neither or the provider has one way only.
	StructuredMode string
}

// Model is a chat-completion model.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// ProviderConfig configures a real model provider. APIKey is a secret: it
// is sent to the provider only, never logged, and never part of an error.
type ProviderConfig struct {
	Model       string   // the provider's model id
	BaseURL     string   // "" uses the provider's default endpoint
	APIKey      string   // "" uses the provider SDK's environment default
	Temperature *float64 // nil leaves the provider default
	// Models maps the model names agents may ask for to the ids this
	// provider serves them under (see ResolveModel); the configured Model
	// is always served.
	Models    map[string]string
	MaxTokens int           // output tokens per call; 0 uses 4096
	Timeout   time.Duration // per HTTP attempt; 0 uses 2 minutes
	// MaxRetries is how many times a 429, 5xx or connection failure is
	// retried (with backoff, jitter and Retry-After); default 2, -1 none.
	MaxRetries int
	Region     string       // Bedrock: the AWS region ("" uses the standard chain)
	HTTPClient *http.Client // nil uses a default client
}

// Provider defaults, for the zero values of ProviderConfig.
const (
	DefaultMaxTokens = 4096
	DefaultTimeout   = 2 * time.Minute
	DefaultRetries   = 2
)

// Resolved returns c with its defaults filled in: MaxTokens, Timeout, and
// MaxRetries as the count to pass to an SDK (0 when retries are off).
func (c ProviderConfig) Resolved() ProviderConfig {
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	return c
}

// Sentinel errors of the llm package.
var (
	// ErrUnavailable marks a provider that failed after its retries (5xx,
	// 429, refused connection, timeout) or refused the credentials: the
	// run ends UNAVAILABLE_DEP unless a fallback model is configured.
	ErrUnavailable = errors.New("llm: model provider unavailable")
	// ErrInvalidOutput marks structured output that failed its schema after
	// every repair attempt. It is permanent (fault.Permanent): asking the
	// same model the same question again fails the same way.
	ErrInvalidOutput = fault.Permanent(errors.New("llm: invalid structured output"))
	// ErrBadInput marks a request whose Input does not fit its Task. It is
	// permanent.
	ErrBadInput = fault.Permanent(errors.New("llm: request input does not fit its task"))
)
