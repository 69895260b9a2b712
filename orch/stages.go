package orch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/domain"
)

// Stages and skills (seed 002's Handoffs and Skills patterns). A standard
// agent with stages is always in one of them: the stage's prompt is added
// to the persona every model of the run sees, and its tools are the run's
// allow-list (AllowsSkill), so the planner discovers, the decider keeps
// and the executor calls only them. The executor offers the stage's
// transition tools; a call of transition_to_<stage> ends the step with a
// HandoffToStage, and the decider moves the run to that stage and plans
// again in it. An agent's skills are loaded when the model asks for one
// (load_skill): the skill's prompt joins the persona and its tools the
// allow-list. The stage and the loaded skills are recorded in the run's
// agent and written to its session, where the session's next run
// continues. Every definition the decisions need was loaded with the
// agent when the run was requested, so the decisions stay pure.

// Stage and skill tools the executor offers a run acting as an agent
// (domain).
const (
	TransitionPrefix    = domain.TransitionPrefix
	ToolEscalateToHuman = domain.ToolEscalateToHuman
	ToolLoadSkill       = domain.ToolLoadSkill
	MaxStageTransitions = domain.MaxStageTransitions
)

// TransitionTarget is the stage a transition tool moves to (domain).
var TransitionTarget = domain.TransitionTarget

// Handoff targets of the stage and skill tools.
const (
	HandoffToStage = "stage"
	HandoffToSkill = "skill"
)

// addPrompts adds the prompts of the agent's stage and skills to the
// persona; dropPrompts takes them out again, before they change.
func (d *decision) addPrompts() {
	add := d.State.Agent.Prompts()
	if add == "" {
		return
	}
	var p domain.Persona
	if cur := d.State.Context.Persona; cur != nil {
		p = *cur
	}
	p.Instructions = strings.TrimSpace(p.Instructions + "\n\n" + add)
	d.State.Context.Persona = &p
}

func (d *decision) dropPrompts() {
	drop := d.State.Agent.Prompts()
	cur := d.State.Context.Persona
	if drop == "" || cur == nil {
		return
	}
	p := *cur
	p.Instructions = strings.TrimSpace(strings.TrimSuffix(p.Instructions, drop))
	d.State.Context.Persona = &p
}

// retune changes the run's agent (a copy: the state's is never written
// in place) between dropping and adding its prompts.
func (d *decision) retune(change func(a *AgentDef)) {
	d.dropPrompts()
	a := *d.State.Agent
	a.Loaded = slices.Clone(a.Loaded)
	change(&a)
	d.State.Agent = &a
	d.addPrompts()
}

// resumeStage puts a run continuing its session's agent in the stage,
// and with the skills, the session's last run left it.
func (d *decision) resumeStage(in Requested) {
	a, s := d.State.Agent, in.Session
	if a == nil || s == nil || s.AgentID != a.ID || s.Stage == "" && len(s.Skills) == 0 {
		return
	}
	d.retune(func(a *AgentDef) {
		if a.StageNamed(s.Stage) != nil {
			a.Stage = s.Stage
		}
		for _, name := range s.Skills {
			if a.Skill(name) != nil && !slices.Contains(a.Loaded, name) {
				a.Loaded = append(a.Loaded, name)
			}
		}
	})
	d.audit("stage.resumed", "", map[string]any{"agent_id": a.ID, "stage": d.State.Agent.Stage,
		"loaded_skills": d.State.Agent.Loaded})
}

// transition moves the run to the stage a transition tool names, and
// plans again in it. A tool the current stage does not offer, a stage
// the agent does not have, or one transition too many ends the run.
func (d *decision) transition(r StepResult, h Handoff) {
	a := d.State.Agent
	cur := a.CurrentStage()
	detail := map[string]any{"agent_id": a.ID, "from": a.Stage, "to": h.Stage, "tool": h.Tool}
	var refusal string
	switch {
	case cur == nil || !slices.Contains(cur.Transitions, h.Tool) || TransitionTarget(h.Tool) != h.Stage:
		refusal = fmt.Sprintf("stage %q does not offer the transition tool %q", a.Stage, h.Tool)
	case a.StageNamed(h.Stage) == nil:
		refusal = fmt.Sprintf("agent %s has no stage %q", a.ID, h.Stage)
	case a.Transitions >= MaxStageTransitions:
		d.audit("stage.refused", "", detail)
		d.finish(CodeRepeatedFailure, fmt.Sprintf("the run moved between stages %d times; the limit is %d",
			a.Transitions, MaxStageTransitions), detail)
		return
	}
	if refusal != "" {
		detail["reason"] = refusal
		d.audit("stage.refused", "", detail)
		d.finish(CodePermissionDenied, "transition refused: "+refusal, detail)
		return
	}
	d.retune(func(a *AgentDef) { a.Stage, a.Transitions = h.Stage, a.Transitions+1 })
	next := d.State.Agent.CurrentStage()
	detail["reason"], detail["tools"] = h.Reason, next.Tools
	d.audit("stage.transitioned", "", detail)
	d.replanAs("stage", fmt.Sprintf("Moved from stage %s to stage %s: %s", cur.ID, next.ID, h.Reason), r)
}

// loadSkill loads the skill load_skill names: its prompt joins the
// persona, its tools the allow-list, and the run plans again with them.
func (d *decision) loadSkill(r StepResult, h Handoff) {
	a := d.State.Agent
	s := a.Skill(h.Skill)
	detail := map[string]any{"agent_id": a.ID, "skill": h.Skill}
	if s == nil {
		detail["reason"] = fmt.Sprintf("agent %s has no skill %q", a.ID, h.Skill)
		d.audit("skill.load_refused", "", detail)
		d.finish(CodePermissionDenied, "load_skill refused: "+detail["reason"].(string), detail)
		return
	}
	if !slices.Contains(a.Loaded, s.Name) {
		d.retune(func(a *AgentDef) { a.Loaded = append(a.Loaded, s.Name) })
	}
	detail["skill_id"], detail["tools"] = s.ID, s.Tools
	d.audit("skill.loaded", "", detail)
	d.replanAs("skill", fmt.Sprintf("Loaded skill %s: %s", s.Name, h.Reason), r)
}

// replanAs plans the run's work again after the agent's stage or skills
// changed, with a note of the change in its history (no reflection pass
// drawn: the step was not a failure).
func (d *decision) replanAs(mode, note string, r StepResult) {
	d.State.Context.History = append(slices.Clone(d.State.Context.History),
		domain.HistoryMessage{Role: "summary", Content: clipText(note, 1000)})
	d.State.Plan.Status = PlanReplanning
	d.audit("subagent_a.spawned", "", map[string]any{"mode": mode})
	f := r
	f.Reason = note
	d.emit(fmt.Sprintf("%s/%d", mode, d.State.Seq), PlanRequest{Run: d.State, Failure: &f})
}

// stageChange records in the session change where the agent was left.
func (d *decision) stageChange(c *SessionChange) {
	a := d.State.Agent
	if a == nil {
		return
	}
	c.Stage, c.Skills = a.Stage, slices.Clone(a.Loaded)
	if hs := d.State.Handoffs; len(hs) == 1 && hs[0].Routed {
		// A router agent's session stays the router's: it classifies
		// each message again.
		c.RoutedBy, c.AgentID, c.Chain, c.Depth, c.ParentAgentID, c.Reason = hs[0].From, hs[0].From, nil, 0, "", ""
		c.Stage, c.Skills = "", nil
	}
}
