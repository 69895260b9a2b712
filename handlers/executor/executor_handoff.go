package executor

import (
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
)

// The handoff tools' input schemas (seed 002 system tools).
var (
	handoffToAgentSchema = json.RawMessage(`{"type":"object","additionalProperties":false,` +
		`"required":["target_agent_id","reason"],"properties":{` +
		`"target_agent_id":{"type":"string","minLength":1,"maxLength":64},` +
		`"reason":{"type":"string","minLength":1,"maxLength":2000},` +
		`"context":{"type":"object","description":"what the target agent should know"}}}`)
	handoffToHumanSchema = json.RawMessage(`{"type":"object","additionalProperties":false,` +
		`"required":["reason"],"properties":{` +
		`"reason":{"type":"string","minLength":1,"maxLength":2000},` +
		`"priority":{"type":"string","enum":["low","normal","high","urgent"]}}}`)
)

// maxHandoffContext bounds the context a handoff carries in the run's
// state.
const maxHandoffContext = 4 << 10

// handoffTools are the handoff tools a step of a run acting as an agent
// offers its model: handoff_to_human always, handoff_to_agent while the
// agent names sub-agents and the chain has a level left, and the stage
// and skill tools (executor_stage.go); in a stage, only the stage's.
func (t *turn) handoffTools() []llm.Tool {
	run := t.req.Run
	if run.Agent == nil || t.lane != nil {
		return nil // a lane works its goal for its supervisor: it hands nothing off
	}
	if run.Agent.CurrentStage() != nil {
		return t.stageTools() // a stage offers only its own tools
	}
	tools := t.stageTools()
	if len(run.Agent.SubAgents) > 0 && len(run.Handoffs) < orch.MaxHandoffDepth {
		tools = append(tools, llm.Tool{Name: orch.ToolHandoffToAgent, Parameters: handoffToAgentSchema,
			Description: "Hand the conversation to another agent: one of " + strings.Join(run.Agent.SubAgents, ", ") +
				". Give the reason and what it should know."})
	}
	return append(tools, llm.Tool{Name: orch.ToolHandoffToHuman, Parameters: handoffToHumanSchema,
		Description: "Hand the conversation to a human operator, with the reason and a priority."})
}

// handoffNote tells the model of a run handed to its agent who handed it
// over, why, and with what context.
func (t *turn) handoffNote() []llm.Message {
	if t.lane != nil {
		return t.laneNote()
	}
	hs := t.req.Run.Handoffs
	if len(hs) == 0 {
		return t.stageNote()
	}
	h := hs[len(hs)-1]
	note := fmt.Sprintf("You are agent %s. Agent %s handed this conversation to you: %s", h.To, h.From, h.Reason)
	if len(h.Context) > 0 {
		// What the other agent passed on may come from what it read: data.
		note += "\nContext from agent " + h.From + ":\n" + llm.Delimit(llm.SourceHandoff+h.From, string(h.Context))
	}
	return append([]llm.Message{{Role: llm.RoleUser, Content: note}}, t.stageNote()...)
}

// handoffCall intercepts a call of a handoff tool by a run acting as an
// agent: valid arguments end the step with OutcomeHandoff for the
// decider (which enforces sub_agents, depth and cycles); invalid ones are
// a repair turn. ok is false for any other tool.
func (t *turn) handoffCall(c llm.ToolCall) (handled bool, err error) {
	if t.lane != nil {
		return false, nil // offered none: a call is a skill outside the lane's
	}
	if handled, err := t.stageCall(c); handled {
		return true, err
	}
	if t.req.Run.Agent == nil || (c.Name != orch.ToolHandoffToAgent && c.Name != orch.ToolHandoffToHuman) ||
		t.req.Run.Agent.CurrentStage() != nil {
		return false, nil
	}
	lin := t.lineage()
	lin.SkillID = c.Name
	in := handoffToHumanSchema
	if c.Name == orch.ToolHandoffToAgent {
		in = handoffToAgentSchema
	}
	if err := schema.Validate(in, c.Arguments); err != nil {
		t.out.Audit("skill.arguments_invalid", lin, map[string]any{"skill_id": c.Name, "reason": err.Error()})
		return true, &invalidArgs{skill: c.Name, err: err}
	}
	var args struct {
		Target   string          `json:"target_agent_id"`
		Reason   string          `json:"reason"`
		Priority string          `json:"priority"`
		Context  json.RawMessage `json:"context"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return true, &invalidArgs{skill: c.Name, err: err}
	}
	if len(args.Context) > maxHandoffContext {
		return true, &invalidArgs{skill: c.Name, err: fmt.Errorf("context is %d bytes; at most %d", len(args.Context), maxHandoffContext)}
	}
	h := orch.Handoff{To: orch.HandoffToHuman, Reason: args.Reason, Priority: args.Priority}
	if c.Name == orch.ToolHandoffToAgent {
		h = orch.Handoff{To: orch.HandoffToAgent, TargetAgentID: args.Target, Reason: args.Reason, Context: args.Context}
	}
	t.out.Audit("handoff.requested", lin, map[string]any{"to": h.To, "target_agent_id": h.TargetAgentID,
		"reason": h.Reason, "priority": h.Priority, "from_agent_id": t.req.Run.Agent.ID, "step": t.step.Index})
	return true, &stepStop{res: orch.StepResult{Outcome: orch.OutcomeHandoff, Reason: "handoff to " + h.To + ": " + h.Reason,
		Handoff: &h}}
}
