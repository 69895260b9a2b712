package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// defaultMaxLanes bounds a fan-out when the supervisor pattern's
// definition sets no max_lanes.
const defaultMaxLanes = orch.MaxPlanSteps

// supervise asks the model to decompose the task into independent
// subagent goals and makes each a lane: a loop step with its own session
// id and skill group, none depending on another, so the router fans them
// out as one group. On a re-iteration (a lane failed, or the review of
// the lanes' findings found gaps) the model sees the lanes that answered,
// those that failed and the gaps, and proposes new lanes.
func (p *Planner) supervise(ctx context.Context, model llm.Model, run orch.RunState, infos []llm.SkillInfo, failure *orch.StepResult) ([]orch.Step, string, error) {
	maxLanes := run.PatternDef.MaxLanes
	if maxLanes <= 0 || maxLanes > defaultMaxLanes {
		maxLanes = defaultMaxLanes
	}
	in := llm.SuperviseInput{Task: run.Task(), Framing: run.Framing, Persona: run.Context.Persona,
		History: run.Context.History, Memories: run.Context.Memories, Skills: infos, MaxLanes: maxLanes,
		Agents: laneAgents(run.Agent, infos)}
	if run.Agent.Supervises() && len(in.Agents) == 0 {
		return nil, fmt.Sprintf("supervisor agent %s has no active sub-agent with a tool for the task (sub-agents %v, active %v)",
			run.Agent.ID, run.Agent.SubAgents, run.Agent.MemberIDs()), nil
	}
	for _, s := range run.Plan.Steps {
		switch s.Status {
		case orch.StepComplete:
			in.Completed = append(in.Completed, llm.LaneGoal{Goal: s.Task, Skills: s.Skills, AgentID: s.LaneAgent()})
		case orch.StepFailed:
			in.Failed = append(in.Failed, llm.FailedLane{Goal: s.Task, Reason: s.FailureReason})
		}
	}
	if failure != nil {
		// The review's gaps: what the next lanes are to close.
		if gaps, ok := strings.CutPrefix(failure.Reason, orch.ReviewGapsPrefix); ok {
			in.Gaps = gaps
		}
	}
	if countComplete(run.Plan)+maxLanes > orch.MaxPlanSteps {
		maxLanes = orch.MaxPlanSteps - countComplete(run.Plan)
		in.MaxLanes = maxLanes
	}
	known := map[string]bool{}
	for _, s := range infos {
		known[s.Name] = true
	}
	req := llm.NewRequest(llm.TaskSupervise, in)
	req.Schema = llm.SuperviseSchema
	var out llm.SuperviseOutput
	_, err := llm.StructuredCheck(ctx, model, req, &out, func() error {
		if out.Infeasible != "" {
			return nil
		}
		return checkLanes(out.Lanes, known, maxLanes, in.Agents)
	})
	if err != nil {
		return nil, "", err
	}
	if out.Infeasible != "" {
		return nil, out.Infeasible, nil
	}
	first := nextIndex(run.Plan)
	steps := make([]orch.Step, len(out.Lanes))
	for i, l := range out.Lanes {
		idx := first + i
		steps[i] = orch.Step{Index: idx, Task: l.Goal, Skills: l.Skills,
			ReturnSpec: orch.ReturnSpec{Shape: llm.LoopAnswerShape, Reason: "the lane's findings, for the supervisor's synthesis"},
			Loop:       &orch.Loop{MaxTurns: run.PatternDef.MaxIterations, SessionID: laneSession(run.Request.SessionID, idx)}}
		if len(in.Agents) > 0 {
			steps[i].Loop.AgentID = l.AgentID // the sub-agent the lane runs as
		}
	}
	return steps, "", nil
}

// laneAgents are the sub-agents a supervisor agent's lanes may run as,
// each with its tools among the discovered skills: the members the run
// recorded that it names in sub_agents and that have a tool for the
// task. Any other run's lanes run as no sub-agent (none).
func laneAgents(a *orch.AgentDef, infos []llm.SkillInfo) []llm.AgentOption {
	if !a.Supervises() {
		return nil
	}
	var opts []llm.AgentOption
	for _, id := range a.SubAgents {
		m := a.Member(id)
		if m == nil {
			continue // not active when the run started
		}
		opt := llm.AgentOption{ID: m.ID, Name: m.Name, Description: m.Description}
		for _, s := range infos {
			if m.AllowsSkill(s.Name) {
				opt.Tools = append(opt.Tools, s.Name)
			}
		}
		if len(opt.Tools) > 0 {
			opts = append(opts, opt)
		}
	}
	return opts
}

// checkLanes rejects a decomposition the run cannot fan out: no lane, too
// many, an empty goal, a skill that was not discovered, or (with agents) a
// lane assigned to none of them or naming a skill outside its agent's
// tools.
func checkLanes(lanes []llm.LaneGoal, known map[string]bool, maxLanes int, agents []llm.AgentOption) error {
	switch {
	case len(lanes) == 0:
		return errors.New("the decomposition has no lane; propose lanes or answer infeasible")
	case len(lanes) > maxLanes:
		return fmt.Errorf("%d lanes; the limit is %d", len(lanes), maxLanes)
	}
	for i, l := range lanes {
		if l.Goal == "" || len(l.Skills) == 0 {
			return fmt.Errorf("lane %d needs a goal and at least one skill", i+1)
		}
		if j := slices.IndexFunc(l.Skills, func(s string) bool { return !known[s] }); j >= 0 {
			return fmt.Errorf("lane %d names skill %q, which is not in the skills list", i+1, l.Skills[j])
		}
		if err := checkLaneAgent(i+1, l, agents); err != nil {
			return err
		}
	}
	return nil
}

// checkLaneAgent checks lane n's assignment: with agents, to one of them,
// with skills among its tools; without, to none.
func checkLaneAgent(n int, l llm.LaneGoal, agents []llm.AgentOption) error {
	if len(agents) == 0 {
		return nil // agent_id is ignored: the lane runs as the run itself
	}
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	i := slices.Index(ids, l.AgentID)
	if i < 0 {
		return fmt.Errorf("lane %d is assigned to agent %q; assign it to one of the agents %v", n, l.AgentID, ids)
	}
	if j := slices.IndexFunc(l.Skills, func(s string) bool { return !slices.Contains(agents[i].Tools, s) }); j >= 0 {
		return fmt.Errorf("lane %d names skill %q, which is not one of agent %s's tools %v", n, l.Skills[j], l.AgentID, agents[i].Tools)
	}
	return nil
}

// laneSession is a lane's own session id: its parent's, suffixed with the
// lane's step, so it stays a valid subject token of at most 64 characters.
func laneSession(parent string, step int) string {
	suffix := fmt.Sprintf("-lane%d", step)
	if len(parent)+len(suffix) > 64 {
		parent = parent[:64-len(suffix)]
	}
	return parent + suffix
}
