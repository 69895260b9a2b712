package executor

import (
	"fmt"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
)

// transitionSchema is the input schema of a stage's transition tools.
var transitionSchema = json.RawMessage(`{"type":"object","additionalProperties":false,` +
	`"properties":{"reason":{"type":"string","maxLength":2000}}}`)

// stageTools are the transition tools of the stage the run's agent is in
// (seed 002 Handoffs pattern) and load_skill while the agent has skills
// it has not loaded (the Skills pattern). A stage offers only its own
// transition tools: handoff_to_human only if it lists it (or
// escalate_to_human).
func (t *turn) stageTools() []llm.Tool {
	a := t.req.Run.Agent
	if a == nil {
		return nil
	}
	var tools []llm.Tool
	if st := a.CurrentStage(); st != nil {
		for _, name := range st.Transitions {
			desc := fmt.Sprintf("Leave stage %s and hand the human operator the conversation, with the reason.", st.ID)
			params := handoffToHumanSchema
			if target := orch.TransitionTarget(name); target != "" {
				desc = fmt.Sprintf("Move the conversation from stage %s to stage %s, with the reason.", st.ID, target)
				params = transitionSchema
			}
			tools = append(tools, llm.Tool{Name: name, Description: desc, Parameters: params})
		}
	}
	var names, lines []string
	for _, s := range a.Skills {
		if !slices.Contains(a.Loaded, s.Name) {
			names = append(names, s.Name)
			lines = append(lines, s.Name+": "+s.Description)
		}
	}
	if len(names) > 0 {
		enum, _ := json.Marshal(names)
		tools = append(tools, llm.Tool{Name: orch.ToolLoadSkill,
			Description: "Load a skill: its instructions and tools join yours. Skills:\n" + strings.Join(lines, "\n"),
			Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["name"],"properties":{` +
				`"name":{"enum":` + string(enum) + `},"reason":{"type":"string","maxLength":2000}}}`)})
	}
	return tools
}

// stageNote gives the step's model the prompts of its agent's stage and
// loaded skills (the tenant's own definitions).
func (t *turn) stageNote() []llm.Message {
	p := t.req.Run.Agent.Prompts()
	if p == "" {
		return nil
	}
	return []llm.Message{{Role: llm.RoleUser, Content: p}}
}

// stageCall intercepts a call of one of stageTools: valid arguments end
// the step with OutcomeHandoff for the decider, which moves the run to
// the stage, loads the skill or hands the session to a human; invalid
// ones are a repair turn. handled is false for any other tool.
func (t *turn) stageCall(c llm.ToolCall) (handled bool, err error) {
	a := t.req.Run.Agent
	i := slices.IndexFunc(t.stageTools(), func(tl llm.Tool) bool { return tl.Name == c.Name })
	if i < 0 {
		return false, nil
	}
	lin := t.lineage()
	lin.SkillID = c.Name
	if err := schema.Validate(t.stageTools()[i].Parameters, c.Arguments); err != nil {
		t.out.Audit("skill.arguments_invalid", lin, map[string]any{"skill_id": c.Name, "reason": err.Error()})
		return true, &invalidArgs{skill: c.Name, err: err}
	}
	var args struct {
		Name     string `json:"name"`
		Reason   string `json:"reason"`
		Priority string `json:"priority"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return true, &invalidArgs{skill: c.Name, err: err}
	}
	h := orch.Handoff{To: orch.HandoffToHuman, Reason: args.Reason, Priority: args.Priority, Tool: c.Name}
	switch {
	case c.Name == orch.ToolLoadSkill:
		h = orch.Handoff{To: orch.HandoffToSkill, Skill: args.Name, Reason: args.Reason, Tool: c.Name}
	case orch.TransitionTarget(c.Name) != "":
		h = orch.Handoff{To: orch.HandoffToStage, Stage: orch.TransitionTarget(c.Name), Reason: args.Reason, Tool: c.Name}
	}
	t.out.Audit("handoff.requested", lin, map[string]any{"to": h.To, "stage": h.Stage, "skill": h.Skill, "tool": c.Name,
		"reason": h.Reason, "from_agent_id": a.ID, "from_stage": a.Stage, "step": t.step.Index})
	return true, &stepStop{res: orch.StepResult{Outcome: orch.OutcomeHandoff, Reason: c.Name + ": " + h.Reason, Handoff: &h}}
}
