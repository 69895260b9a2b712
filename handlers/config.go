package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/llm"
)

// Execution patterns (seed 001).
const (
	PatternReact           = "react"
	PatternPlanThenExecute = "plan-then-execute"
	PatternSupervisor      = "supervisor"
)

// ConfigKeyTaskTypes is the config bucket key holding the task types as a
// JSON array; edit it with `nats kv put config task_types '[…]'`.
const ConfigKeyTaskTypes = "task_types"

// DefaultTaskTypes is the seed of the config bucket (seed 001).
var DefaultTaskTypes = []llm.TaskType{
	{Name: "general", Description: "any task with no specific domain framing: list, rank, look up and combine data from skills",
		WhenToUse: "the task needs data from several skills combined in a known order",
		Patterns:  []string{PatternPlanThenExecute, PatternReact, PatternSupervisor}, DefaultPattern: PatternPlanThenExecute},
	{Name: "research", Description: "open-ended investigation of a question",
		WhenToUse: "the next step depends on what the last one found",
		Patterns:  []string{PatternReact, PatternPlanThenExecute}, DefaultPattern: PatternReact},
	{Name: "risk-assessment", Description: "multi-dimensional risk analysis across independent dimensions",
		WhenToUse: "the task splits into independent dimensions that can be worked in parallel",
		Patterns:  []string{PatternSupervisor, PatternPlanThenExecute, PatternReact}, DefaultPattern: PatternSupervisor},
	{Name: "summarisation", Description: "condense or summarise information",
		WhenToUse: "the task asks for a shorter form of given or retrieved content",
		Patterns:  []string{PatternReact}, DefaultPattern: PatternReact},
}

// SeedConfig writes the default task types unless the bucket already has
// them, so an operator's edits survive restarts.
func SeedConfig(ctx context.Context, kv jetstream.KeyValue) error {
	b, err := json.Marshal(DefaultTaskTypes)
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, ConfigKeyTaskTypes, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("handlers: seed config: %w", err)
	}
	return nil
}

// loadTaskTypes reads the task types, falling back to the defaults when
// the bucket has none (seed 001 fallback behaviour).
func loadTaskTypes(ctx context.Context, kv jetstream.KeyValue) ([]llm.TaskType, error) {
	if kv == nil {
		return DefaultTaskTypes, nil
	}
	e, err := kv.Get(ctx, ConfigKeyTaskTypes)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return DefaultTaskTypes, nil
	}
	if err != nil {
		return nil, fmt.Errorf("handlers: config: %w", err)
	}
	var tts []llm.TaskType
	if err := json.Unmarshal(e.Value(), &tts); err != nil || len(tts) == 0 {
		return DefaultTaskTypes, nil
	}
	return tts, nil
}
