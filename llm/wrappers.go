package llm

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Metered wraps a provider: it times every call, counts it and prices its
// usage from Prices by the model id the provider answered with.
type Metered struct {
	Model  Model
	Prices Prices
}

// Complete calls the wrapped model.
func (m Metered) Complete(ctx context.Context, req Request) (Response, error) {
	start := time.Now()
	resp, err := m.Model.Complete(ctx, req)
	resp.Latency = time.Since(start)
	if err != nil {
		return resp, err
	}
	resp.Usage.Calls = 1
	resp.Usage.CostUSD = m.Prices.Cost(resp.Model, resp.Usage)
	return resp, nil
}

// Fallback answers with Secondary when Primary is unavailable
// (ErrUnavailable): MODEL_FALLBACK=offline keeps runs going while a
// provider is down. The response says why it fell back.
type Fallback struct {
	Primary, Secondary Model
}

// Complete calls Primary, then Secondary if Primary is unavailable.
func (f Fallback) Complete(ctx context.Context, req Request) (Response, error) {
	resp, err := f.Primary.Complete(ctx, req)
	if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
		return resp, err
	}
	resp, err2 := f.Secondary.Complete(ctx, req)
	if err2 != nil {
		return resp, errors.Join(err, err2)
	}
	resp.FallbackReason = err.Error()
	return resp, nil
}

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
	Error          string  `json:"error,omitempty"`
}

// Usage is the call's usage.
func (c Call) Usage() Usage {
	u := Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CachedInputTokens: c.CachedTokens, CostUSD: c.CostUSD}
	if c.Error == "" {
		u.Calls = 1
	}
	return u
}

// Recorder wraps a model for one unit of work and records every call made
// through it, failed ones included.
type Recorder struct {
	model Model
	mu    sync.Mutex
	calls []Call
}

// Record returns a Recorder around m.
func Record(m Model) *Recorder { return &Recorder{model: m} }

// Complete calls the wrapped model and records the call.
func (r *Recorder) Complete(ctx context.Context, req Request) (Response, error) {
	resp, err := r.model.Complete(ctx, req)
	c := Call{Task: req.Task, PromptVersion: req.PromptVersion, Provider: resp.Provider, Model: resp.Model,
		InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, CachedTokens: resp.Usage.CachedInputTokens,
		CostUSD: resp.Usage.CostUSD, LatencyMS: resp.Latency.Milliseconds(), Streamed: req.Stream != nil,
		FallbackReason: resp.FallbackReason}
	if err != nil {
		c.Error = err.Error()
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return resp, err
}

// Calls returns the calls recorded so far, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Total is the summed usage of the recorded calls.
func (r *Recorder) Total() Usage {
	var u Usage
	for _, c := range r.Calls() {
		u = u.Add(c.Usage())
	}
	return u
}
