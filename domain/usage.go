package domain

// Usage is the token usage of one model call, or the sum of several; it
// feeds budgets and the audit trail. InputTokens includes
// CachedInputTokens.
type Usage struct {
	InputTokens       int     `json:"input_tokens"`
	OutputTokens      int     `json:"output_tokens"`
	CachedInputTokens int     `json:"cached_input_tokens,omitempty"`
	CostUSD           float64 `json:"cost_usd"`
	Calls             int     `json:"model_calls"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens, CostUSD: u.CostUSD + v.CostUSD, Calls: u.Calls + v.Calls}
}

// Task names what a model call was asked to do.
type Task string

// Model tasks.
const (
	TaskRoute      Task = "route"
	TaskPlan       Task = "plan"
	TaskAct        Task = "act"
	TaskSynthesize Task = "synthesize"
	TaskExtract    Task = "extract"
	TaskSupervise  Task = "supervise"
	TaskReview     Task = "review"
	// TaskClassify is a router agent's choice of a sub-agent (seed
	// 002 Router pattern).
	TaskClassify Task = "classify"
	// TaskSummarize condenses the turns that leave an agent's history
	// window into the session's summary (seed 002).
	TaskSummarize Task = "summarize"
)

// Call is the record of one model call: what was asked (task, prompt
// version), who answered, what it cost and how long it took. It is the
// payload of a model.called audit event.
type Call struct {
	Task           Task    `json:"task"`
	PromptVersion  string  `json:"prompt_version,omitempty"`
	Provider       string  `json:"provider,omitempty"`
	Model          string  `json:"model,omitempty"`
	InputTokens    int     `json:"input_tokens"`
	OutputTokens   int     `json:"output_tokens"`
	CachedTokens   int     `json:"cached_input_tokens"`
	CostUSD        float64 `json:"cost_usd"`
	LatencyMS      int64   `json:"latency_ms"`
	Streamed       bool    `json:"streamed,omitempty"`
	FallbackReason string  `json:"fallback_reason,omitempty"`
	// StructuredMode is how the call asked for structured output or tool
	// calls (json_schema, json_object, tool_forcing or prompt; see
	// llm/openai), when the provider reports it.
	StructuredMode string `json:"structured_mode,omitempty"`
	Error          string `json:"error,omitempty"`
	// Request and Response, kept only for a tenant that keeps payload
	// records, are what the call asked (its typed input and messages) and
	// what the model answered, redacted and clipped (llm.Recorder).
	Request  string `json:"request,omitempty"`
	Response string `json:"response,omitempty"`
}

// Usage is the call's usage.
func (c Call) Usage() Usage {
	u := Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CachedInputTokens: c.CachedTokens, CostUSD: c.CostUSD}
	if c.Error == "" {
		u.Calls = 1
	}
	return u
}
