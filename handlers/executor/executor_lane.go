package executor

import (
	"fmt"
	"slices"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
)

// asLane makes a supervisor agent's lane run as the sub-agent its
// decomposition assigned it to (seed 002 supervisor pattern): the turn's
// model gets the sub-agent's settings and instructions (laneNote), and
// the step's skills are cut to the sub-agent's tools, whatever the step
// names (the decider cut them already: this is the executor's own hard
// limit). A lane offers no handoff tool. A step whose assignment the run
// does not record cannot run.
func (t *turn) asLane() error {
	run := t.req.Run
	lane, err := run.Agent.LaneAgent(t.step.LaneAgent())
	if err != nil {
		return events.Permanent(fmt.Errorf("handlers: step %d of plan %s: %w", t.step.Index, run.Plan.PlanID, err))
	}
	if lane == nil {
		return nil
	}
	t.lane = lane
	t.step.Skills = slices.DeleteFunc(slices.Clone(t.step.Skills), func(name string) bool { return !lane.AllowsSkill(name) })
	return nil
}

// laneNote tells a lane's model which sub-agent it is, for which
// supervisor, and the sub-agent's instructions (the tenant's own
// definition).
func (t *turn) laneNote() []llm.Message {
	sup, a := t.req.Run.Agent, t.lane
	note := fmt.Sprintf("You are agent %s (%s), a sub-agent of agent %s (%s): this lane of its task is yours; "+
		"it synthesises the lanes' findings.", a.Name, a.ID, sup.Name, sup.ID)
	if a.Instructions != "" {
		note += "\nYour instructions:\n" + a.Instructions
	}
	return []llm.Message{{Role: llm.RoleUser, Content: note}}
}
