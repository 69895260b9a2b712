package orch

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/domain"
)

// What a run records of its agent (its definition, stages and skills) is
// domain's vocabulary (domain/agent.go); orch names it.
type (
	AgentDef      = domain.AgentDef
	ModelSettings = domain.ModelSettings
	AgentStage    = domain.AgentStage
	SkillDef      = domain.SkillDef
	HistoryWindow = domain.HistoryWindow
)

// AgentSupervisor is the agent type whose lanes run as its sub-agents
// (domain/supervise.go).
const AgentSupervisor = domain.AgentSupervisor

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
	if def.Stage == "" || def.StageNamed(def.Stage) == nil {
		def.Stage = def.InitialStage()
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
	sel := map[string]any{"agent_id": a.ID, "version": a.Version, "type": a.Type, "tools": a.Tools, "max_turns": a.MaxTurns,
		"limits": a.Limits}
	if a.Supervises() {
		sel["members"] = a.MemberIDs() // the sub-agents its lanes may run as
	}
	d.audit("agent.selected", "", sel)
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
// agent does not allow (a supervisor's lane: the skills its sub-agent
// does not), tracing what it removed. It is the allow-list's
// enforcement: the executor then calls only the step's skills.
func (d *decision) restrictTools(steps []Step) []Step {
	if d.State.Agent == nil {
		return steps
	}
	out := make([]Step, len(steps))
	for i, s := range steps {
		a := cmp.Or(d.State.Agent.Member(s.LaneAgent()), d.State.Agent)
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
