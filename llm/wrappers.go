package llm

import (
	"context"
	"errors"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/text"
)

// Metered wraps a provider: it times every call, counts it and prices its
// usage from Prices by the model id the provider answered with.
type Metered struct {
	Model  Model
	Prices Prices
	// ID is the configured model id, which prices a call before it is
	// made (budgets reserve its cost); "" for the offline model.
	ID string
}

// Pricer is a model that knows its price before a call: budgets reserve
// a call's cost from it.
type Pricer interface {
	Price() (Price, bool)
}

// Price is the configured model's price.
func (m Metered) Price() (Price, bool) {
	if m.ID == "" {
		return Price{}, true // the offline model is free
	}
	return m.Prices.Lookup(m.ID)
}

// Price is the higher of the primary's and the secondary's prices: either
// may answer.
func (f Fallback) Price() (Price, bool) {
	p1, ok1 := PriceOf(f.Primary)
	p2, ok2 := PriceOf(f.Secondary)
	if !ok1 || !ok2 {
		return Price{}, false
	}
	return Price{Input: max(p1.Input, p2.Input), CachedInput: max(p1.CachedInput, p2.CachedInput), Output: max(p1.Output, p2.Output)}, true
}

// OutputLimiter is a model that knows the most output tokens one call may
// produce (a provider's configured max_tokens).
type OutputLimiter interface {
	MaxOutputTokens() int
}

// MaxOutputOf is the most output tokens one call of m may produce, or
// DefaultMaxTokens when m does not say (the offline model's answers are
// bounded by their data rather than a setting).
func MaxOutputOf(m Model) int {
	if l, ok := m.(OutputLimiter); ok && l.MaxOutputTokens() > 0 {
		return l.MaxOutputTokens()
	}
	return DefaultMaxTokens
}

// MaxOutputTokens is the wrapped model's output limit.
func (m Metered) MaxOutputTokens() int { return MaxOutputOf(m.Model) }

// MaxOutputTokens is the larger of the two models' output limits.
func (f Fallback) MaxOutputTokens() int { return max(MaxOutputOf(f.Primary), MaxOutputOf(f.Secondary)) }

// MaxOutputTokens is the recorded model's output limit.
func (r *Recorder) MaxOutputTokens() int { return MaxOutputOf(r.model) }

// PriceOf is m's price, if it knows it.
func PriceOf(m Model) (Price, bool) {
	if p, ok := m.(Pricer); ok {
		return p.Price()
	}
	return Price{}, false
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

// Recorder wraps a model for one unit of work and records every call made
// through it, failed ones included.
type Recorder struct {
	model Model
	// payloads keeps each call's request and answer in its record.
	payloads bool
	mu       sync.Mutex
	calls    []Call
}

// MaxPayloadRecord bounds what a payload record keeps of one request,
// answer or tool result, in bytes, after redaction.
const MaxPayloadRecord = 8 << 10

// PayloadRecord is what a payload record keeps of s: personal data and
// credentials masked, clipped to MaxPayloadRecord bytes.
func PayloadRecord(s string) string { return text.Redact(s, MaxPayloadRecord) }

// KeepPayloads makes r keep each call's request and answer in its record
// (Call.Request, Call.Response: PayloadRecord of them), for a tenant that
// keeps payload records. It returns r.
func (r *Recorder) KeepPayloads(keep bool) *Recorder {
	r.payloads = keep
	return r
}

// payloads sets c's request and answer from req and resp.
func payloads(c *Call, req Request, resp Response) {
	in, _ := json.Marshal(struct {
		Input    any       `json:"input,omitempty"`
		Messages []Message `json:"messages,omitempty"`
		Tools    []string  `json:"tools,omitempty"`
	}{req.Input, req.Messages, toolNames(req.Tools)})
	c.Request = PayloadRecord(string(in))
	out := resp.Message.Content
	if len(resp.Message.ToolCalls) > 0 {
		b, _ := json.Marshal(resp.Message.ToolCalls)
		out += string(b)
	}
	c.Response = PayloadRecord(out)
}

func toolNames(ts []Tool) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// Record returns a Recorder around m.
func Record(m Model) *Recorder { return &Recorder{model: m} }

// Complete calls the wrapped model and records the call.
func (r *Recorder) Complete(ctx context.Context, req Request) (Response, error) {
	resp, err := r.model.Complete(ctx, req)
	c := Call{Task: req.Task, PromptVersion: req.PromptVersion, Provider: resp.Provider, Model: resp.Model,
		InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, CachedTokens: resp.Usage.CachedInputTokens,
		CostUSD: resp.Usage.CostUSD, LatencyMS: resp.Latency.Milliseconds(), Streamed: req.Stream != nil,
		FallbackReason: resp.FallbackReason, StructuredMode: resp.StructuredMode}
	if err != nil {
		c.Error = err.Error()
	}
	if r.payloads {
		payloads(&c, req, resp)
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return resp, err
}

// Price is the recorded model's price, if it knows it.
func (r *Recorder) Price() (Price, bool) { return PriceOf(r.model) }

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

// IsOffline reports whether m answers with the offline model (through
// the wrappers of this package; a fallback by its primary): its answers
// are functions of its requests, so what a real model would write (a
// session's summary) is derived without it.
func IsOffline(m Model) bool {
	switch v := m.(type) {
	case interface{ Offline() bool }:
		return v.Offline()
	case Metered:
		return IsOffline(v.Model)
	case Fallback:
		return IsOffline(v.Primary)
	case *Recorder:
		return IsOffline(v.model)
	case Limited:
		return IsOffline(v.Model)
	}
	return false
}
