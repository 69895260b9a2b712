package orch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/domain"
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

// agentMismatch reports a requested agent the router did not load: the
// run cannot act as an agent it does not have.
func agentMismatch(req RunRequest, in Requested) string {
	want, _ := SessionAgent(req, in.Session) // the run's own agent, or its session's
	switch {
	case in.AgentError != "":
		return in.AgentError
	case want == "" && in.Agent != nil:
		return fmt.Sprintf("agent %q was loaded for a run that names none", in.Agent.ID)
	case want != "" && (in.Agent == nil || in.Agent.ID != want):
		return fmt.Sprintf("agent %q is not defined for tenant %q", want, req.TenantID)
	}
	return ""
}

// actAs records the run's agent: its definition and its instructions in
// the persona the models see.
func (d *decision) actAs(a *AgentDef) {
	if a == nil {
		return
	}
	def := *a
	def.Tools = slices.Clone(a.Tools)
	def.AutoApprove = slices.Clone(a.AutoApprove)
	def.Loaded = slices.Clone(a.Loaded)
	if def.Stage == "" || def.stage(def.Stage) == nil {
		def.Stage = def.initialStage()
	}
	d.State.Agent = &def
	if a.Instructions != "" {
		var p domain.Persona
		if cur := d.State.Context.Persona; cur != nil {
			p = *cur
		}
		p.Instructions = strings.TrimSpace(p.Instructions + "\n\n" + a.Instructions)
		if p.Name == "" {
			p.Name = a.Name
		}
		d.State.Context.Persona = &p
	}
	d.addPrompts()
	d.audit("agent.selected", "", map[string]any{"agent_id": a.ID, "version": a.Version, "type": a.Type,
		"tools": a.Tools, "max_turns": a.MaxTurns, "limits": a.Limits})
}

// agentLimits caps the resolved limits with the agent's, returning the
// dimensions it lowered.
func (d *decision) agentLimits() []Dim {
	a := d.State.Agent
	if a == nil {
		return nil
	}
	var clamped []Dim
	for _, dim := range Dims {
		if c, ok := a.Limits[dim]; ok {
			if cur, set := d.State.Budget.Limits[dim]; !set || cur > c {
				d.State.Budget.Limits[dim] = c
				clamped = append(clamped, dim)
			}
		}
	}
	return clamped
}

// restrictTools removes from each proposed step the skills the run's
// agent does not allow, tracing what it removed. It is the allow-list's
// enforcement: the executor then calls only the step's skills.
func (d *decision) restrictTools(steps []Step) []Step {
	a := d.State.Agent
	if a == nil {
		return steps
	}
	out := make([]Step, len(steps))
	for i, s := range steps {
		var kept, removed []string
		for _, name := range s.Skills {
			if a.AllowsSkill(name) {
				kept = append(kept, name)
			} else {
				removed = append(removed, name)
			}
		}
		if len(removed) > 0 {
			d.audit("agent.tools_restricted", s.TaskID, map[string]any{"step": s.Index, "agent_id": a.ID,
				"removed": removed, "allowed": a.Tools})
			s.Skills = kept
			if s.Skills == nil {
				s.Skills = []string{}
			}
		}
		out[i] = s
	}
	return out
}
