package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// Execution patterns (seed 001).
const (
	PatternReact           = orch.PatternReact
	PatternPlanThenExecute = orch.PatternPlanThenExecute
	PatternSupervisor      = orch.PatternSupervisor
)

// Config bucket keys, each a JSON array; edit them with
// `nats kv put config task_types '[…]'`.
const (
	ConfigKeyTaskTypes = "task_types"
	ConfigKeyPatterns  = "patterns"
	// ConfigKeyBudgets holds the budget policy (orch.BudgetPolicy), a
	// JSON object: default limits, per task type, tenant caps, escalation.
	ConfigKeyBudgets = "budgets"
)

// DefaultPatterns are the seeded pattern definitions (seed 001).
var DefaultPatterns = []llm.Pattern{
	{Name: PatternReact, Description: "ReACT: one loop of reasoning and tool calls, each turn its own message",
		WhenToUse: "adaptive, open-ended tasks where the next action depends on the last observation", MaxIterations: 20},
	{Name: PatternPlanThenExecute, Description: "plan the steps as a DAG with output contracts, then run ready steps in parallel",
		WhenToUse: "the task needs data from several skills combined in a known order"},
	{Name: PatternSupervisor, Description: "decompose into independent subagent goals, run each as its own loop in parallel, then synthesise",
		WhenToUse: "the task splits into independent dimensions", MaxIterations: 12, MaxLanes: 10},
}

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
		Patterns:  []string{PatternSupervisor, PatternPlanThenExecute, PatternReact}, DefaultPattern: PatternSupervisor,
		Framing: "Analyse across financial, reputational, legal and operational dimensions using structured analytic techniques."},
	{Name: "summarisation", Description: "condense or summarise information",
		WhenToUse: "the task asks for a shorter form of given or retrieved content",
		Patterns:  []string{PatternReact}, DefaultPattern: PatternReact},
}

// SeedConfig writes the default task types and patterns unless the bucket
// already has them, so an operator's edits survive restarts.
func SeedConfig(ctx context.Context, kv jetstream.KeyValue) error {
	seeds := map[string]any{ConfigKeyTaskTypes: DefaultTaskTypes, ConfigKeyPatterns: DefaultPatterns,
		ConfigKeyBudgets: orch.BudgetPolicy{Defaults: orch.DefaultLimits}}
	for key, v := range seeds {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := kv.Create(ctx, key, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("handlers: seed config %s: %w", key, err)
		}
	}
	return nil
}

// runConfig is what a run's first hop reads from the config bucket.
type runConfig struct {
	taskTypes []llm.TaskType
	patterns  []llm.Pattern
	policy    orch.BudgetPolicy
}

// ConfigFollower holds the task types, patterns and budget policy as the
// config bucket has them, followed by a watch: a run's first hop reads
// them from memory, with no request. An edit applies to the runs that
// start after the watch delivers it (milliseconds); an invalid budget
// policy makes runs wait, as a read of it would, until it is fixed.
type ConfigFollower struct {
	cur  atomic.Pointer[followed]
	vals map[string][]byte // the watch's goroutine only
}

type followed struct {
	rc  runConfig
	err error
}

// FollowConfig loads the run configuration of kv and follows its changes
// until ctx ends.
func FollowConfig(ctx context.Context, kv jetstream.KeyValue) (*ConfigFollower, error) {
	f := &ConfigFollower{vals: map[string][]byte{}}
	f.apply()
	w, err := kv.WatchFiltered(ctx, []string{ConfigKeyTaskTypes, ConfigKeyPatterns, ConfigKeyBudgets})
	if err != nil {
		return nil, fmt.Errorf("handlers: watch the run configuration: %w", err)
	}
	err = kvs.Follow(ctx, w, func(e jetstream.KeyValueEntry) {
		if e.Operation() == jetstream.KeyValuePut {
			f.vals[e.Key()] = e.Value()
		} else {
			delete(f.vals, e.Key())
		}
		f.apply()
	})
	return f, err
}

func (f *ConfigFollower) apply() {
	var fl followed
	fl.rc.taskTypes = parseConfig(f.vals[ConfigKeyTaskTypes], DefaultTaskTypes)
	fl.rc.patterns = parseConfig(f.vals[ConfigKeyPatterns], DefaultPatterns)
	fl.rc.policy, fl.err = parsePolicy(f.vals[ConfigKeyBudgets])
	f.cur.Store(&fl)
}

// current is the configuration as the watch last delivered it.
func (f *ConfigFollower) current() (runConfig, error) {
	fl := f.cur.Load()
	return fl.rc, fl.err
}

// loadRunConfig reads the task types, the patterns and the budget policy
// with one request when js is set (a batched direct get of the bucket's
// last values), else with one read each.
func loadRunConfig(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (runConfig, error) {
	var rc runConfig
	var err error
	if js == nil || kv == nil {
		if rc.taskTypes, err = loadTaskTypes(ctx, kv); err != nil {
			return rc, err
		}
		if rc.patterns, err = loadPatterns(ctx, kv); err != nil {
			return rc, err
		}
		rc.policy, err = loadPolicy(ctx, kv)
		return rc, err
	}
	keys := []string{ConfigKeyTaskTypes, ConfigKeyPatterns, ConfigKeyBudgets}
	vals, err := events.LastValues(ctx, js, kv.Bucket(), keys)
	if err != nil {
		return rc, fmt.Errorf("handlers: config: %w", err)
	}
	rc.taskTypes = parseConfig(vals[ConfigKeyTaskTypes], DefaultTaskTypes)
	rc.patterns = parseConfig(vals[ConfigKeyPatterns], DefaultPatterns)
	rc.policy, err = parsePolicy(vals[ConfigKeyBudgets])
	return rc, err
}

// loadTaskTypes reads the task types, falling back to the defaults when
// the bucket has none (seed 001 fallback behaviour).
func loadTaskTypes(ctx context.Context, kv jetstream.KeyValue) ([]llm.TaskType, error) {
	return loadConfig(ctx, kv, ConfigKeyTaskTypes, DefaultTaskTypes)
}

// loadPatterns reads the pattern definitions, falling back to the
// defaults.
func loadPatterns(ctx context.Context, kv jetstream.KeyValue) ([]llm.Pattern, error) {
	return loadConfig(ctx, kv, ConfigKeyPatterns, DefaultPatterns)
}

// loadPolicy reads the budget policy. An invalid one is an error, never
// ignored: runs wait (and are redelivered) until it is fixed, rather than
// run without the caps it was meant to set.
func loadPolicy(ctx context.Context, kv jetstream.KeyValue) (orch.BudgetPolicy, error) {
	if kv == nil {
		return orch.BudgetPolicy{}, nil
	}
	e, err := kv.Get(ctx, ConfigKeyBudgets)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return orch.BudgetPolicy{}, nil
	}
	if err != nil {
		return orch.BudgetPolicy{}, fmt.Errorf("handlers: config %s: %w", ConfigKeyBudgets, err)
	}
	return parsePolicy(e.Value())
}

// parsePolicy decodes a stored budget policy (nil: none) strictly.
func parsePolicy(b []byte) (orch.BudgetPolicy, error) {
	var p orch.BudgetPolicy
	if b == nil {
		return p, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("handlers: config %s: %w", ConfigKeyBudgets, err)
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("handlers: config %s: %w", ConfigKeyBudgets, err)
	}
	return p, nil
}

// loadConfig reads the JSON array under key, or def when the bucket has
// no usable one.
func loadConfig[T any](ctx context.Context, kv jetstream.KeyValue, key string, def []T) ([]T, error) {
	if kv == nil {
		return def, nil
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return def, nil
	}
	if err != nil {
		return nil, fmt.Errorf("handlers: config %s: %w", key, err)
	}
	return parseConfig(e.Value(), def), nil
}

// parseConfig decodes a stored JSON array, or is def when there is no
// usable one.
func parseConfig[T any](b []byte, def []T) []T {
	var v []T
	if err := json.Unmarshal(b, &v); err != nil || len(v) == 0 {
		return def
	}
	return v
}
