package llm

import (
	"context"
	"slices"
)

// Settings are the model settings of the agent a run acts as: every call
// the run makes as that agent (plan, act, synthesize) carries them.
type Settings struct {
	Model       string
	Temperature *float64
	MaxTokens   int
	TopP        *float64
	Stop        []string
}

// IsZero reports settings that change nothing.
func (s Settings) IsZero() bool {
	return s.Model == "" && s.Temperature == nil && s.MaxTokens == 0 && s.TopP == nil && len(s.Stop) == 0
}

// WithSettings returns m sending s with every request: the model name,
// temperature, top_p and stop sequences the request does not set itself,
// and its max_tokens lowered to s.MaxTokens. Zero settings return m.
func WithSettings(m Model, s Settings) Model {
	if s.IsZero() {
		return m
	}
	return settled{model: m, s: s}
}

type settled struct {
	model Model
	s     Settings
}

// Complete calls the wrapped model with the settings applied.
func (m settled) Complete(ctx context.Context, req Request) (Response, error) {
	if req.Model == "" {
		req.Model = m.s.Model
	}
	if req.Temperature == nil {
		req.Temperature = m.s.Temperature
	}
	if req.TopP == nil {
		req.TopP = m.s.TopP
	}
	if len(req.Stop) == 0 {
		req.Stop = slices.Clone(m.s.Stop)
	}
	if m.s.MaxTokens > 0 {
		req.MaxTokens = CapTokens(m.s.MaxTokens, req.MaxTokens)
	}
	return m.model.Complete(ctx, req)
}

// MaxOutputTokens is the wrapped model's output limit, lowered to the
// settings' max_tokens.
func (m settled) MaxOutputTokens() int { return CapTokens(MaxOutputOf(m.model), m.s.MaxTokens) }

// Price is the wrapped model's price.
func (m settled) Price() (Price, bool) { return PriceOf(m.model) }
