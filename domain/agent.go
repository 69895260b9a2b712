package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// AgentDef is the agent definition a run acts as (seed 002), recorded in
// the run's state as the run saw it when it was requested, so every later
// decision (and a replay) uses that version whatever was edited since.
// The agents package owns the definitions and their validation; this is
// what a run needs of one.
type AgentDef struct {
	ID      string `json:"agent_id"`
	Version int64  `json:"version"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	// Instructions are the agent's system prompt: the decider adds them
	// to the persona every model of the run is given.
	Instructions string `json:"instructions,omitempty"`
	// Model and ModelSettings are the agent's model choice, for the
	// adapters that pick a model per run.
	Model         string        `json:"model,omitempty"`
	ModelSettings ModelSettings `json:"model_config,omitzero"`
	// Tools is the allow-list of skills the run may call: the decider
	// removes every other skill from the steps it dispatches, and the
	// planner discovers only these. Empty allows none.
	Tools []string `json:"tools"`
	// SubAgents are the agents it may hand off to (supervisor, router).
	SubAgents []string `json:"sub_agents,omitempty"`
	// MaxTurns bounds the agent turns of a session (seed 002): a run
	// whose session has had them all takes HandoffBehavior instead
	// (escalate: to a human; end: the session ends). 0 is unlimited.
	MaxTurns        int    `json:"max_turns,omitempty"`
	HandoffBehavior string `json:"handoff_behavior,omitempty"`
	// Limits cap the run's budget per dimension, whatever the other
	// layers (configuration, request) ask for.
	Limits Vector `json:"limits,omitempty"`
	// AutoApprove are the approval modes (local_write, network,
	// delegated) the run calls without a gate, whatever its tenant's
	// policy gates.
	AutoApprove []string `json:"auto_approve,omitempty"`
	// Description says what the agent is for: a router agent classifies
	// by its sub-agents' descriptions.
	Description string `json:"description,omitempty"`
	// Stages are the agent's Handoffs-pattern stages (seed 002 steps)
	// and Stage the one the run is in (stages.go).
	Stages []AgentStage `json:"stages,omitempty"`
	Stage  string       `json:"stage,omitempty"`
	// Transitions counts the stage transitions of the run.
	Transitions int `json:"stage_transitions,omitempty"`
	// Skills are the skill definitions the agent may load (seed 002
	// Skills pattern), as the run loaded them, and Loaded the names of
	// those the run's model loaded (stages.go).
	Skills []SkillDef `json:"skills,omitempty"`
	Loaded []string   `json:"loaded_skills,omitempty"`
	// History is how much of its session's conversation the agent's runs
	// see; nil is DefaultHistoryWindow.
	History *HistoryWindow `json:"history_window,omitempty"`
	// Members are the sub-agents a supervisor agent's lanes run as: the
	// active ones of its SubAgents when the run started, as AsMember
	// records them (supervise.go).
	Members []AgentDef `json:"members,omitempty"`
}

// HistoryWindow is how much of its session's conversation a run of an
// agent sees (seed 002's history window): at most MaxMessages messages,
// the session's first always among them; once the session has had more
// than SummarizeAfter turns the older messages are folded into one
// summary; and all of it within MaxTokens (four bytes a token). An unset
// setting is DefaultHistoryWindow's.
type HistoryWindow struct {
	MaxMessages    int `json:"max_messages,omitempty"`
	MaxTokens      int `json:"max_tokens,omitempty"`
	SummarizeAfter int `json:"summarize_after,omitempty"`
}

// DefaultHistoryWindow is seed 002's window: 20 messages, 4,000 tokens,
// summarised after 10 turns.
var DefaultHistoryWindow = HistoryWindow{MaxMessages: 20, MaxTokens: 4000, SummarizeAfter: 10}

// Resolved is w with every unset setting DefaultHistoryWindow's (all of
// them for a nil w).
func (w *HistoryWindow) Resolved() HistoryWindow {
	r := DefaultHistoryWindow
	if w != nil {
		r.MaxMessages = cmp.Or(w.MaxMessages, r.MaxMessages)
		r.MaxTokens = cmp.Or(w.MaxTokens, r.MaxTokens)
		r.SummarizeAfter = cmp.Or(w.SummarizeAfter, r.SummarizeAfter)
	}
	return r
}

// ModelSettings are an agent's sampling settings (seed 002 ModelConfig).
type ModelSettings struct {
	// Temperature is from 0 to 1; unset uses the model's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxTokens bounds each answer's output tokens, from 1 to 200000.
	MaxTokens int `json:"max_tokens,omitempty"`
	// TopP is nucleus sampling, above 0 and at most 1.
	TopP *float64 `json:"top_p,omitempty"`
	// StopSequences end generation; at most 4, none empty.
	StopSequences []string `json:"stop_sequences,omitempty"`
}

// AllowsSkill reports whether a run acting as a may call the skill name:
// any skill without an agent; with one, its current stage's tools (or,
// without stages, the agent's tools) and those of the skills it loaded.
func (a *AgentDef) AllowsSkill(name string) bool {
	if a == nil {
		return true
	}
	tools := a.Tools
	if st := a.CurrentStage(); st != nil {
		tools = st.Tools
	}
	return slices.Contains(tools, name) || slices.ContainsFunc(a.LoadedSkills(), func(s SkillDef) bool {
		return slices.Contains(s.Tools, name)
	})
}

// AutoApproves reports whether a run acting as a calls skills in the
// approval mode mode without a gate by the agent's own definition; never
// a destructive call, nor without an agent.
func (a *AgentDef) AutoApproves(mode string) bool {
	return a != nil && mode != "destructive" && slices.Contains(a.AutoApprove, mode)
}

// AgentStage is one stage of an agent's Handoffs pattern (seed 002
// AgentStep): its prompt, its tools and the transition tools it offers.
type AgentStage struct {
	ID          string   `json:"step_id"`
	Name        string   `json:"name"`
	Prompt      string   `json:"system_prompt"`
	Tools       []string `json:"tools"`
	Transitions []string `json:"transition_tools,omitempty"`
	Initial     bool     `json:"is_initial,omitempty"`
	Final       bool     `json:"is_final,omitempty"`
}

// SkillDef is a skill an agent may load (seed 002 Skill): a named prompt
// with the tools it adds.
type SkillDef struct {
	ID          string   `json:"skill_id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Prompt      string   `json:"prompt"`
	Tools       []string `json:"tools,omitempty"`
}

// Stage and skill tools the executor offers a run acting as an agent.
const (
	// TransitionPrefix starts a transition tool's name: the rest is the
	// stage it moves to.
	TransitionPrefix = "transition_to_"
	// ToolEscalateToHuman is a transition tool that hands the session to
	// a human, as handoff_to_human does.
	ToolEscalateToHuman = "escalate_to_human"
	// ToolLoadSkill loads one of the agent's skills by name.
	ToolLoadSkill = "load_skill"
)

// MaxStageTransitions bounds the stage transitions of one run: a model
// that keeps moving between stages ends the run REPEATED_FAILURE.
const MaxStageTransitions = 8

// CurrentStage is the stage the agent is in, nil without stages.
func (a *AgentDef) CurrentStage() *AgentStage {
	if a == nil {
		return nil
	}
	return a.StageNamed(a.Stage)
}

// StageNamed is the agent's stage id, nil if it has none.
func (a *AgentDef) StageNamed(id string) *AgentStage {
	for i := range a.Stages {
		if a.Stages[i].ID == id {
			return &a.Stages[i]
		}
	}
	return nil
}

// InitialStage is the stage a session of the agent starts in: the one
// marked initial, else the first ("" without stages).
func (a *AgentDef) InitialStage() string {
	for _, s := range a.Stages {
		if s.Initial {
			return s.ID
		}
	}
	if len(a.Stages) > 0 {
		return a.Stages[0].ID
	}
	return ""
}

// LoadedSkills are the definitions of the skills the run loaded.
func (a *AgentDef) LoadedSkills() []SkillDef {
	if a == nil {
		return nil
	}
	var out []SkillDef
	for _, s := range a.Skills {
		if slices.Contains(a.Loaded, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// Skill is the agent's skill named name, nil if it has none.
func (a *AgentDef) Skill(name string) *SkillDef {
	if a == nil {
		return nil
	}
	for i := range a.Skills {
		if a.Skills[i].Name == name {
			return &a.Skills[i]
		}
	}
	return nil
}

// TransitionTarget is the stage a transition tool moves to ("" for a
// tool that names none).
func TransitionTarget(tool string) string {
	t, ok := strings.CutPrefix(tool, TransitionPrefix)
	if !ok {
		return ""
	}
	return t
}

// Prompts is what the agent's stage and loaded skills add to the
// persona's instructions (and the executor's turns see).
func (a *AgentDef) Prompts() string {
	if a == nil {
		return ""
	}
	var parts []string
	if st := a.CurrentStage(); st != nil {
		parts = append(parts, fmt.Sprintf("Current stage: %s (%s).\n%s", st.Name, st.ID, st.Prompt))
	}
	for _, s := range a.LoadedSkills() {
		parts = append(parts, fmt.Sprintf("Skill %s is loaded.\n%s", s.Name, s.Prompt))
	}
	return strings.Join(parts, "\n\n")
}
