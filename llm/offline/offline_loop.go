package offline

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/schema"
)

// isLoop reports a loop step: one whose return_spec asks for a free-text
// answer (the ReACT loop, a supervisor lane) rather than a data contract.
func isLoop(in llm.ActInput) bool {
	shape, err := schema.ParseShape(in.ReturnSpec.Shape)
	if err != nil || len(shape.Properties) != 1 {
		return false
	}
	return shape.Properties["answer"].Type == "string"
}

// loopAct is one turn of a loop: it calls, in the order the offline
// planner would chain them, each allowed skill not called yet whose
// required arguments the task or an earlier result provides (so a skill
// consumes what the previous one observed), and answers with the last
// successful observation once no skill is left.
func loopAct(in llm.ActInput, history []llm.Message) (llm.Message, error) {
	called := map[string]bool{}
	var observed []map[string]any
	var last, lastSkill, calling string
	for _, m := range history {
		for _, c := range m.ToolCalls {
			called[c.Name], calling = true, c.Name
		}
		if m.Role != llm.RoleTool || m.IsError {
			continue
		}
		lastSkill = calling
		var obj map[string]any
		if json.Unmarshal([]byte(m.Content), &obj) == nil {
			observed = append([]map[string]any{obj}, observed...) // newest first
		}
		last = m.Content
	}
	for _, s := range loopOrder(in) {
		if called[s.Name] {
			continue
		}
		if args, ok := loopArgs(in, s, observed); ok {
			b, err := json.Marshal(args)
			if err != nil {
				return llm.Message{}, fmt.Errorf("offline: %w", err)
			}
			return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: fmt.Sprintf("call-%d", len(history)+1), Name: s.Name, Arguments: b}}}, nil
		}
	}
	if last == "" {
		return jsonMessage(llm.ActOutput{Status: "insufficient", Reason: "no allowed skill could be called for the goal",
			Suggestion: "give the loop a skill whose inputs the task states"})
	}
	return jsonMessage(llm.ActOutput{Status: "complete", Label: "answer", Data: mustJSON(map[string]string{"answer": answerOf(in, lastSkill, last)})})
}

// answerOf is a loop's answer from its last observation: the answer to
// the question the task asks of it (query), when the skill that made it
// returns a list of records and the task asks something of them (a
// count, a filter, the top n); otherwise the observation itself.
func answerOf(in llm.ActInput, skill, observation string) string {
	for _, s := range in.Skills {
		if s.Name != skill {
			continue
		}
		out, err := schema.ParseShape(s.OutputSchema)
		var data map[string]any
		if err != nil || json.Unmarshal([]byte(observation), &data) != nil {
			break
		}
		if q := newQuery(in.Task, out); q != nil {
			res := q.apply(data, 0)
			if sum := res[summaryField].([]any)[0].(map[string]any); sum["question"] == "" && sum["where"] == "" {
				break // nothing asked of the records: they are the answer
			}
			return string(mustJSON(res))
		}
	}
	return observation
}

// loopOrder is the order a loop tries its skills in: the chain the
// offline planner would plan for the goal (producers first), so a loop
// calls only the skills that serve its goal.
func loopOrder(in llm.ActInput) []llm.SkillInfo {
	po := plan(llm.PlanInput{Task: in.Task, Skills: in.Skills, MaxSteps: 10, FirstStep: 1})
	byName := map[string]llm.SkillInfo{}
	for _, s := range in.Skills {
		byName[s.Name] = s
	}
	var order []llm.SkillInfo
	for _, st := range po.Steps {
		for _, name := range st.Skills {
			if s, ok := byName[name]; ok {
				order = append(order, s)
			}
		}
	}
	return order
}

// loopArgs fills a skill's arguments from earlier observations and the
// task, and reports whether every required one is there.
func loopArgs(in llm.ActInput, s llm.SkillInfo, observed []map[string]any) (map[string]any, bool) {
	input, err := schema.ParseShape(s.InputSchema)
	if err != nil {
		return nil, false
	}
	given := taskArgs(in.Task, input)
	args := map[string]any{}
	for _, field := range sortedNames(input.Properties) {
		if v := fromInputs(observed, field, input.Properties[field]); v != nil {
			args[field] = v
		} else if v, ok := given[field]; ok {
			args[field] = v
		}
	}
	for _, field := range input.Required {
		if _, ok := args[field]; !ok {
			return nil, false
		}
	}
	return args, true
}

// supervise splits the task into lanes: it plans the task as the offline
// planner would, then makes each chain of steps that ends in an output
// nothing else consumes one lane, whose skill group is the chain's skills.
// Independent outputs become parallel lanes.
func supervise(in llm.SuperviseInput) llm.SuperviseOutput {
	po := plan(llm.PlanInput{Task: in.Task, Skills: in.Skills, MaxSteps: 10, FirstStep: 1})
	if po.Infeasible != "" {
		return llm.SuperviseOutput{Infeasible: po.Infeasible}
	}
	byStep := map[int]llm.PlannedStep{}
	consumed := map[int]bool{}
	for _, s := range po.Steps {
		byStep[s.Step] = s
		for _, d := range s.DependsOn {
			consumed[d] = true
		}
	}
	done := map[string]bool{}
	for _, l := range in.Completed {
		done[l.Goal] = true
	}
	var lanes []llm.LaneGoal
	for _, s := range po.Steps {
		if consumed[s.Step] {
			continue
		}
		skills := map[string]bool{}
		var walk func(n int)
		walk = func(n int) {
			st := byStep[n]
			for _, sk := range st.Skills {
				skills[sk] = true
			}
			for _, d := range st.DependsOn {
				walk(d)
			}
		}
		walk(s.Step)
		goal := s.Task
		if done[goal] {
			continue
		}
		names := make([]string, 0, len(skills))
		for sk := range skills {
			names = append(names, sk)
		}
		sort.Strings(names)
		lanes = append(lanes, llm.LaneGoal{Goal: goal, Skills: orderBy(names, in.Skills)})
	}
	if len(in.Agents) > 0 {
		if lanes = assign(lanes, in.Agents); len(lanes) == 0 {
			return llm.SuperviseOutput{Infeasible: "no sub-agent has a tool for the task's goals"}
		}
	}
	if max := in.MaxLanes; max > 0 && len(lanes) > max {
		lanes = lanes[:max]
	}
	if len(lanes) == 0 {
		return llm.SuperviseOutput{Infeasible: "every goal of the task is answered or failed: " + failedGoals(in.Failed)}
	}
	return llm.SuperviseOutput{Lanes: lanes}
}

// assign gives each lane to the sub-agent (of a supervisor agent) whose
// tools cover most of its skills; among equals, the one whose name and
// description fit its goal best, then the first listed. The lane keeps
// only that agent's skills; a lane no agent has a skill of is dropped.
func assign(lanes []llm.LaneGoal, agents []llm.AgentOption) []llm.LaneGoal {
	var out []llm.LaneGoal
	for _, l := range lanes {
		fit := agentScores(agents, l.Goal)
		best, covers := -1, 0
		for i, a := range agents {
			n := len(covered(l.Skills, a.Tools))
			if n > covers || n == covers && n > 0 && fit[i] > fit[best] {
				best, covers = i, n
			}
		}
		if best < 0 {
			continue
		}
		l.AgentID, l.Skills = agents[best].ID, covered(l.Skills, agents[best].Tools)
		out = append(out, l)
	}
	return out
}

// covered are the skills among tools, in the order of skills.
func covered(skills, tools []string) []string {
	var out []string
	for _, s := range skills {
		if slices.Contains(tools, s) {
			out = append(out, s)
		}
	}
	return out
}

// orderBy keeps the skills in the order the input listed them (by
// relevance), so a lane's loop tries the most relevant first.
func orderBy(names []string, all []llm.SkillInfo) []string {
	pos := map[string]int{}
	for i, s := range all {
		pos[s.Name] = i
	}
	sort.SliceStable(names, func(i, j int) bool { return pos[names[i]] < pos[names[j]] })
	return names
}

func failedGoals(f []llm.FailedLane) string {
	var s []string
	for _, l := range f {
		s = append(s, l.Goal+" ("+l.Reason+")")
	}
	return strings.Join(s, "; ")
}

// review judges the lanes' findings sufficient. The offline supervisor's
// decomposition is a function of the task and the skills alone, so
// another fan-out would repeat the lanes it has: it has no way to close
// a gap, and says so rather than spend the run's budget on a repeat.
func review(llm.ReviewInput) llm.ReviewOutput { return llm.ReviewOutput{Sufficient: true} }
