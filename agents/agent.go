package agents

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Agent types (seed 002): the pattern the agent runs.
const (
	// TypeStandard is a single agent with tools, optionally with skills
	// or handoff steps, or with sub-agents it may hand off to.
	TypeStandard = "standard"
	// TypeSupervisor runs the supervisor pattern: each lane it fans out
	// runs as one of its sub-agents (orch.AgentSupervisor).
	TypeSupervisor = orch.AgentSupervisor
	// TypeRouter classifies the input and routes it to a sub-agent.
	TypeRouter = "router"
)

// Agent statuses. Only an active agent can run.
const (
	// StatusActive can run and be triggered.
	StatusActive = "active"
	// StatusInactive is kept but not run.
	StatusInactive = "inactive"
	// StatusDraft is being written and not run.
	StatusDraft = "draft"
)

// Handoff behaviours: what an agent does when its turns run out.
const (
	// HandoffEscalate hands the conversation to a human.
	HandoffEscalate = "escalate"
	// HandoffEnd ends the conversation.
	HandoffEnd = "end"
)

// Defaults and bounds of an agent's fields (seed 002's contract).
const (
	// DefaultModel is the model of an agent that names none.
	DefaultModel = "anthropic.claude-3-sonnet"
	// DefaultMaxTurns is the turn limit of an agent that sets none.
	DefaultMaxTurns = 10
	// MaxMaxTurns bounds max_turns.
	MaxMaxTurns = 100
	// MaxHandoffDepth is the deepest chain of handoffs below an agent
	// (seed 002: level 0 to level 3).
	MaxHandoffDepth = 3
	// MaxNameLen bounds names and ids of steps, in bytes.
	MaxNameLen = 200
	// MaxDescriptionLen bounds descriptions.
	MaxDescriptionLen = 4 << 10
	// MaxPromptLen bounds system prompts.
	MaxPromptLen = 32 << 10
	// MaxListLen bounds tools, sub-agents, skills, steps and stop
	// sequences.
	MaxListLen = 64
)

// ModelConfig is an agent's sampling settings (seed 002 ModelConfig):
// the run records the same type.
type ModelConfig = orch.ModelSettings

// Step is one step of a standard agent's handoff pattern (seed 002
// AgentStep).
type Step struct {
	StepID          string   `json:"step_id"`
	Name            string   `json:"name"`
	SystemPrompt    string   `json:"system_prompt"`
	Tools           []string `json:"tools,omitempty"`
	TransitionTools []string `json:"transition_tools,omitempty"`
	IsInitial       bool     `json:"is_initial,omitempty"`
	IsFinal         bool     `json:"is_final,omitempty"`
}

// AgentSpec is what a caller writes of an agent: every field but its
// identity, version and times.
type AgentSpec struct {
	Name         string      `json:"name"`
	Description  string      `json:"description,omitempty"`
	Type         string      `json:"type"`
	SystemPrompt string      `json:"system_prompt"`
	Model        string      `json:"model"`
	ModelConfig  ModelConfig `json:"model_config,omitzero"`
	// Tools is the allow-list of the skills (MCP tools) the agent's runs
	// may call; empty allows none.
	Tools []string `json:"tools"`
	// SubAgents are, for a standard agent, the agents it may hand off to
	// (handoff_to_agent); for a supervisor, the agents its lanes run as;
	// for a router, the agents it classifies among.
	SubAgents []string `json:"sub_agents"`
	// Skills are the skill prompts it may load (seed 002 Skill).
	Skills          []string `json:"skills"`
	Steps           []Step   `json:"steps,omitempty"`
	MaxTurns        int      `json:"max_turns"`
	HandoffBehavior string   `json:"handoff_behavior"`
	// Limits cap each run's budget (seed 002's per-invoke token limits,
	// and any other budget dimension).
	Limits orch.Vector `json:"limits,omitempty"`
	// AutoApprove are the approval modes the agent's runs call without a
	// gate, whatever the tenant's approval_gates say: some of
	// AutoApproveModes. A destructive call is always gated.
	AutoApprove []string `json:"auto_approve,omitempty"`
	// HistoryWindow is how much of its session's conversation the
	// agent's runs see (seed 002; orch.HistoryWindow): unset settings
	// are 20 messages, 4,000 tokens, summarised after 10 turns.
	HistoryWindow *orch.HistoryWindow `json:"history_window,omitempty"`
	Status        string              `json:"status"`
}

// AutoApproveModes are the approval modes an agent may take out of its
// runs' gates (skills.Modes less read_only, never gated, and destructive,
// always gated).
var AutoApproveModes = []string{"local_write", "network", "delegated"}

// Agent is an agent definition as the API answers it.
type Agent struct {
	AgentID  string `json:"agent_id"`
	TenantID string `json:"tenant_id"`
	AgentSpec
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Normalize fills the defaults of the fields left out: type standard,
// the default model, max_turns 10, handoff escalate, status active, and
// empty lists rather than null.
func (s *AgentSpec) Normalize() {
	s.Name = strings.TrimSpace(s.Name)
	if s.Type == "" {
		s.Type = TypeStandard
	}
	if s.Model == "" {
		s.Model = DefaultModel
	}
	if s.MaxTurns == 0 {
		s.MaxTurns = DefaultMaxTurns
	}
	if s.HandoffBehavior == "" {
		s.HandoffBehavior = HandoffEscalate
	}
	if s.Status == "" {
		s.Status = StatusActive
	}
	for _, l := range []*[]string{&s.Tools, &s.SubAgents, &s.Skills} {
		if *l == nil {
			*l = []string{}
		}
	}
}

var (
	// idRE is an agent, step or skill id: it becomes a subject token.
	idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// toolRE is a tool name as MCP allows it.
	toolRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	// modelRE is a provider's model identifier.
	modelRE = regexp.MustCompile(`^[A-Za-z0-9_.:/@-]{1,128}$`)
)

// ValidID reports whether id can name an agent or a trigger.
func ValidID(id string) bool { return idRE.MatchString(id) }

// Validate checks a normalized spec of the agent self (empty on create)
// and returns the first violation. References to other agents are
// checked by CheckSubAgents, which needs the tenant's agents.
func (s AgentSpec) Validate(self string) *Error {
	checks := []func() *Error{
		func() *Error { return text("name", s.Name, MaxNameLen, CodeNameRequired) },
		func() *Error { return optionalText("description", s.Description, MaxDescriptionLen) },
		func() *Error { return oneOf(CodeInvalidType, "type", s.Type, TypeStandard, TypeSupervisor, TypeRouter) },
		func() *Error { return text("system_prompt", s.SystemPrompt, MaxPromptLen, CodeSystemPromptRequired) },
		func() *Error {
			if !modelRE.MatchString(s.Model) {
				return invalid(CodeInvalidModel, "model", "model must match %s", modelRE)
			}
			return nil
		},
		func() *Error { return validateModelConfig(s.ModelConfig) },
		func() *Error { return names(CodeInvalidTool, "tools", s.Tools, toolRE) },
		func() *Error { return s.validateSubAgents(self) },
		func() *Error { return names(CodeInvalidSkill, "skills", s.Skills, idRE) },
		s.validateSteps,
		func() *Error {
			if s.MaxTurns < 1 || s.MaxTurns > MaxMaxTurns {
				return invalid(CodeInvalidMaxTurns, "max_turns", "max_turns must be from 1 to %d", MaxMaxTurns)
			}
			return nil
		},
		func() *Error {
			return oneOf(CodeInvalidHandoffBehavior, "handoff_behavior", s.HandoffBehavior, HandoffEscalate, HandoffEnd)
		},
		func() *Error {
			if err := s.Limits.Validate(); err != nil {
				return invalid(CodeInvalidLimits, "limits", "%v", err)
			}
			return nil
		},
		func() *Error {
			for _, m := range s.AutoApprove {
				if !slices.Contains(AutoApproveModes, m) {
					return invalid(CodeInvalidAutoApprove, "auto_approve",
						"auto_approve lists approval modes among %v (a destructive call is always gated): %q is not one", AutoApproveModes, m)
				}
			}
			return nil
		},
		func() *Error { return validateWindow(s.HistoryWindow) },
		func() *Error {
			return oneOf(CodeInvalidStatus, "status", s.Status, StatusActive, StatusInactive, StatusDraft)
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateWindow checks a history window's settings: each unset (0) or
// within its bounds.
func validateWindow(w *orch.HistoryWindow) *Error {
	const f = "history_window."
	switch {
	case w == nil:
		return nil
	case w.MaxMessages != 0 && (w.MaxMessages < 2 || w.MaxMessages > 200):
		return invalid(CodeInvalidHistoryWindow, f+"max_messages", "max_messages must be from 2 to 200")
	case w.MaxTokens != 0 && (w.MaxTokens < 100 || w.MaxTokens > 100_000):
		return invalid(CodeInvalidHistoryWindow, f+"max_tokens", "max_tokens must be from 100 to 100000")
	case w.SummarizeAfter != 0 && (w.SummarizeAfter < 1 || w.SummarizeAfter > 100):
		return invalid(CodeInvalidHistoryWindow, f+"summarize_after", "summarize_after must be from 1 to 100 turns")
	}
	return nil
}

func validateModelConfig(c ModelConfig) *Error {
	const f = "model_config."
	switch {
	case c.Temperature != nil && !(*c.Temperature >= 0 && *c.Temperature <= 1):
		return invalid(CodeInvalidModelConfig, f+"temperature", "temperature must be from 0 to 1")
	case c.MaxTokens < 0 || c.MaxTokens > 200_000:
		return invalid(CodeInvalidModelConfig, f+"max_tokens", "max_tokens must be from 1 to 200000")
	case c.TopP != nil && !(*c.TopP > 0 && *c.TopP <= 1) || c.TopP != nil && math.IsNaN(*c.TopP):
		return invalid(CodeInvalidModelConfig, f+"top_p", "top_p must be above 0 and at most 1")
	case len(c.StopSequences) > 4:
		return invalid(CodeInvalidModelConfig, f+"stop_sequences", "at most 4 stop sequences")
	}
	for i, s := range c.StopSequences {
		if s == "" || len(s) > MaxNameLen {
			return invalid(CodeInvalidModelConfig, fmt.Sprintf("%sstop_sequences[%d]", f, i),
				"a stop sequence has 1 to %d bytes", MaxNameLen)
		}
	}
	return nil
}

func (s AgentSpec) validateSubAgents(self string) *Error {
	if err := names(CodeInvalidSubAgent, "sub_agents", s.SubAgents, idRE); err != nil {
		return err
	}
	if self != "" && slices.Contains(s.SubAgents, self) {
		return invalid(CodeInvalidSubAgent, "sub_agents", "an agent cannot be its own sub-agent")
	}
	switch {
	case s.Type == TypeStandard && len(s.SubAgents) > 0 && len(s.Steps) > 0:
		return invalid(CodeSubAgentsNotAllowed, "sub_agents",
			"a standard agent with steps hands off by its stages' transition tools, not to sub-agents")
	case s.Type != TypeStandard && len(s.SubAgents) == 0:
		return invalid(CodeSubAgentsRequired, "sub_agents", "a %s agent needs at least one sub-agent", s.Type)
	}
	return nil
}

// validateSteps checks the handoff steps: a standard agent's only, ids
// unique, exactly one initial step and at least one final one, and each
// step's tools among the agent's.
func (s AgentSpec) validateSteps() *Error {
	if len(s.Steps) == 0 {
		return nil
	}
	if s.Type != TypeStandard {
		return invalid(CodeInvalidSteps, "steps", "only a standard agent has handoff steps")
	}
	if len(s.Steps) > MaxListLen {
		return invalid(CodeInvalidSteps, "steps", "at most %d steps", MaxListLen)
	}
	seen, initial, final := map[string]bool{}, 0, 0
	for i, st := range s.Steps {
		f := fmt.Sprintf("steps[%d]", i)
		switch {
		case !idRE.MatchString(st.StepID) || seen[st.StepID]:
			return invalid(CodeInvalidSteps, f+".step_id", "step ids are unique and match %s", idRE)
		case strings.TrimSpace(st.Name) == "" || len(st.Name) > MaxNameLen:
			return invalid(CodeInvalidSteps, f+".name", "a step has a name of at most %d bytes", MaxNameLen)
		case strings.TrimSpace(st.SystemPrompt) == "" || len(st.SystemPrompt) > MaxPromptLen:
			return invalid(CodeInvalidSteps, f+".system_prompt", "a step has a system prompt of at most %d bytes", MaxPromptLen)
		}
		seen[st.StepID] = true
		for j, t := range st.Tools {
			if !slices.Contains(s.Tools, t) {
				return invalid(CodeInvalidSteps, fmt.Sprintf("%s.tools[%d]", f, j), "tool %q is not one of the agent's tools", t)
			}
		}
		if err := names(CodeInvalidSteps, f+".transition_tools", st.TransitionTools, toolRE); err != nil {
			return err
		}
		if err := s.checkTransitions(f, st); err != nil {
			return err
		}
		if st.IsInitial {
			initial++
		}
		if st.IsFinal {
			final++
		}
	}
	if initial != 1 {
		return invalid(CodeInvalidSteps, "steps", "exactly one step is initial, not %d", initial)
	}
	if final == 0 {
		return invalid(CodeInvalidSteps, "steps", "at least one step is final")
	}
	return nil
}

// checkTransitions checks a step's transition tools: each is
// transition_to_<step_id> naming another step of the agent, or
// handoff_to_human / escalate_to_human (the session goes to a human).
func (s AgentSpec) checkTransitions(f string, st Step) *Error {
	for j, t := range st.TransitionTools {
		field := fmt.Sprintf("%s.transition_tools[%d]", f, j)
		if t == orch.ToolHandoffToHuman || t == orch.ToolEscalateToHuman {
			continue
		}
		target := orch.TransitionTarget(t)
		if target == "" {
			return invalid(CodeInvalidSteps, field, "a transition tool is %s<step_id>, %s or %s, not %q",
				orch.TransitionPrefix, orch.ToolHandoffToHuman, orch.ToolEscalateToHuman, t)
		}
		if target == st.StepID || !slices.ContainsFunc(s.Steps, func(o Step) bool { return o.StepID == target }) {
			return invalid(CodeInvalidSteps, field, "%q names no other step of the agent", t)
		}
	}
	return nil
}

// CheckSubAgents checks the agent's handoff targets against the tenant's
// agents (by id, with their sub-agents): each must exist, and no handoff
// chain from the agent may loop or go deeper than MaxHandoffDepth.
func CheckSubAgents(self string, spec *AgentSpec, tenantAgents map[string][]string) *Error {
	for i, id := range spec.SubAgents {
		if _, ok := tenantAgents[id]; !ok {
			return invalid(CodeUnknownAgent, fmt.Sprintf("sub_agents[%d]", i), "agent %q is not defined", id)
		}
	}
	graph := func(id string) []string {
		if id == self {
			return spec.SubAgents
		}
		return tenantAgents[id]
	}
	var depth func(id string, path []string) int
	depth = func(id string, path []string) int {
		if slices.Contains(path, id) || len(path) > MaxHandoffDepth {
			return math.MaxInt // a loop, or deeper than allowed already
		}
		deepest := 0
		for _, sub := range graph(id) {
			deepest = max(deepest, satAdd(depth(sub, append(path, id))))
			if deepest > MaxHandoffDepth {
				break
			}
		}
		return deepest
	}
	if d := depth(self, nil); d > MaxHandoffDepth {
		return invalid(CodeHandoffTooDeep, "sub_agents", "handoffs from this agent loop or go deeper than %d levels", MaxHandoffDepth)
	}
	// The chains of the agents that reach this one grow too.
	for _, id := range slices.Sorted(maps.Keys(tenantAgents)) {
		if id == self {
			continue
		}
		if d := depth(id, nil); d > MaxHandoffDepth {
			return invalid(CodeHandoffTooDeep, "sub_agents",
				"agent %q hands off through this one: its handoffs would loop or go deeper than %d levels", id, MaxHandoffDepth)
		}
	}
	return nil
}

func satAdd(n int) int {
	if n == math.MaxInt {
		return n
	}
	return n + 1
}

// text checks a required text field.
func text(field, s string, limit int, missing string) *Error {
	if strings.TrimSpace(s) == "" {
		return invalid(missing, field, "%s is required", field)
	}
	return optionalText(field, s, limit)
}

func optionalText(field, s string, limit int) *Error {
	if len(s) > limit {
		return invalid(CodeFieldTooLong, field, "%s is longer than %d bytes", field, limit)
	}
	if !utf8.ValidString(s) {
		return invalid(CodeFieldTooLong, field, "%s is not valid UTF-8", field)
	}
	return nil
}

func oneOf(code, field, v string, allowed ...string) *Error {
	if !slices.Contains(allowed, v) {
		return invalid(code, field, "%s must be one of %s, not %q", field, strings.Join(allowed, ", "), v)
	}
	return nil
}

// names checks a list of unique names that match re.
func names(code, field string, list []string, re *regexp.Regexp) *Error {
	if len(list) > MaxListLen {
		return invalid(code, field, "at most %d entries", MaxListLen)
	}
	for i, n := range list {
		if !re.MatchString(n) {
			return invalid(code, fmt.Sprintf("%s[%d]", field, i), "%q does not match %s", n, re)
		}
		if slices.Contains(list[:i], n) {
			return invalid(code, fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", n)
		}
	}
	return nil
}

// Definition is the agent as the store keeps it.
func (a Agent) Definition() (store.Definition, error) {
	spec, err := json.Marshal(a.AgentSpec)
	if err != nil {
		return store.Definition{}, fmt.Errorf("agents: encode agent %q: %w", a.AgentID, err)
	}
	return store.Definition{TenantID: a.TenantID, Kind: store.KindAgent, ID: a.AgentID, Name: a.Name, Status: a.Status,
		Version: a.Version, Spec: spec, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}, nil
}

// AgentOf reads an agent from its stored definition.
func AgentOf(d store.Definition) (Agent, error) {
	if d.Kind != store.KindAgent {
		return Agent{}, fmt.Errorf("agents: definition %q is a %s, not an agent", d.ID, d.Kind)
	}
	a := Agent{AgentID: d.ID, TenantID: d.TenantID, Version: d.Version, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if err := json.Unmarshal(d.Spec, &a.AgentSpec); err != nil {
		return Agent{}, fmt.Errorf("agents: decode agent %q: %w", d.ID, err)
	}
	a.Normalize()
	return a, nil
}

// RunDef is what a run records of the agent it acts as.
func (a Agent) RunDef() *orch.AgentDef {
	mc := a.ModelConfig
	mc.StopSequences = slices.Clone(mc.StopSequences)
	return &orch.AgentDef{ID: a.AgentID, Version: a.Version, Name: a.Name, Type: a.Type, Instructions: a.SystemPrompt,
		Model: a.Model, ModelSettings: mc,
		Tools: slices.Clone(a.Tools), SubAgents: slices.Clone(a.SubAgents), MaxTurns: a.MaxTurns,
		HandoffBehavior: a.HandoffBehavior, Limits: a.Limits, AutoApprove: slices.Clone(a.AutoApprove),
		Description: a.Description, Stages: stagesOf(a.Steps), History: cloneWindow(a.HistoryWindow)}
}

// cloneWindow is a copy of w: the run's record shares nothing with the
// definition.
func cloneWindow(w *orch.HistoryWindow) *orch.HistoryWindow {
	if w == nil {
		return nil
	}
	c := *w
	return &c
}

// stagesOf are an agent's steps as a run records them.
func stagesOf(steps []Step) []orch.AgentStage {
	var out []orch.AgentStage
	for _, st := range steps {
		out = append(out, orch.AgentStage{ID: st.StepID, Name: st.Name, Prompt: st.SystemPrompt,
			Tools: slices.Clone(st.Tools), Transitions: slices.Clone(st.TransitionTools), Initial: st.IsInitial, Final: st.IsFinal})
	}
	return out
}
