package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// Goals of the two lanes a supervisor agent's decomposition assigns to
// its researcher and its writer.
const (
	researchGoal = "List the active outlets"
	writeGoal    = "Score the engagement of outlets out-001 and out-002"
)

// supervisorTeam stores a supervisor agent (agent-lead) over a
// researcher allowed outlet_list and a writer allowed
// engagement_analytics.
func supervisorTeam(t *testing.T, env *handlerstest.Env) {
	t.Helper()
	for id, c := range map[string]struct{ name, desc, prompt, tool string }{
		"agent-researcher": {"Researcher", "Researches the brand's outlets", "You research outlets; cite their ids.", demo.SkillOutletList},
		"agent-writer":     {"Writer", "Writes up engagement scores", "You write up engagement in one line.", demo.SkillEngagementAnalytics},
	} {
		handlerstest.PutAgent(t, env, id, func(s *agents.AgentSpec) {
			s.Name, s.Description, s.SystemPrompt, s.Tools, s.MaxTurns, s.Limits = c.name, c.desc, c.prompt, []string{c.tool}, 0, nil
			s.Model = "claude-" + strings.ToLower(c.name) // a lane's model settings are its sub-agent's
		})
	}
	handlerstest.PutAgent(t, env, "agent-lead", func(s *agents.AgentSpec) {
		s.Name, s.SystemPrompt, s.Type, s.MaxTurns, s.Limits = "Lead", "Lead the outlet review.", agents.TypeSupervisor, 0, nil
		s.SubAgents, s.Tools = []string{"agent-researcher", "agent-writer"}, nil
		s.Model = "claude-lead"
	})
}

// decomposition is a supervise answer of lanes (goal, agent, skills...).
func decomposition(t *testing.T, lanes ...llm.LaneGoal) llmtest.Reply {
	t.Helper()
	b, err := json.Marshal(llm.SuperviseOutput{Lanes: lanes})
	if err != nil {
		t.Fatal(err)
	}
	return llmtest.Reply{Response: handlerstest.TextResp(string(b))}
}

// laneOf is the goal of the lane an act request is a turn of.
func laneOf(req llm.Request) string { return req.Input.(llm.ActInput).Task }

// skillCallsByStep are the skills the run's skill.called audits name, by
// the task id of the step that called them.
func skillCallsByStep(t *testing.T, seen []event.Event) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, ev := range handlerstest.OfType(seen, events.AuditType("skill.called")) {
		a := handlerstest.Decode[events.Audit](t, ev)
		var p struct {
			Skill string `json:"skill_id"`
		}
		if err := json.Unmarshal(a.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out[a.TaskID] = append(out[a.TaskID], p.Skill)
	}
	return out
}

// TestSupervisorAgent_RunsEachLaneAsItsSubAgent: a supervisor agent runs
// the supervisor pattern (whatever the routing model chose), its
// decomposition assigns one lane to its researcher and one to its
// writer, and each lane runs as its sub-agent: the sub-agent's
// instructions and model settings, its tools only (the researcher's
// model asking for the writer's tool is refused, and calls nothing but
// its own), no handoff tools. The supervisor synthesises. The trace
// records the assignment, and a replay re-derives the run.
func TestSupervisorAgent_RunsEachLaneAsItsSubAgent(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	supervisorTeam(t, env)
	model := routedTo("research", router.PatternReact)
	model.On(llm.TaskSupervise, decomposition(t,
		llm.LaneGoal{Goal: researchGoal, Skills: []string{demo.SkillOutletList}, AgentID: "agent-researcher"},
		llm.LaneGoal{Goal: writeGoal, Skills: []string{demo.SkillEngagementAnalytics}, AgentID: "agent-writer"}))
	// The lanes' turns alternate (the researcher's first): the researcher
	// first asks for the writer's tool, then calls its own.
	model.On(llm.TaskAct,
		llmtest.ToolCall("r-1", demo.SkillEngagementAnalytics, `{"outlet_ids":["out-001"]}`),
		llmtest.ToolCall("w-1", demo.SkillEngagementAnalytics, `{"outlet_ids":["out-001","out-002"]}`),
		llmtest.ToolCall("r-2", demo.SkillOutletList, `{"status":"active"}`),
		loopAnswer(t, "out-001 engages most"),
		loopAnswer(t, "out-001 and out-002 are active"))
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, agentRun(t, "run-lead", "agent-lead", handlerstest.Session, "Review the active outlets and how they engage"))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s (trace %v)", res.TerminalCode, res.Reason, traceNames(seen))
	}
	if r := handlerstest.AuditPayloads(t, seen, "routing.decided"); len(r) != 1 || r[0]["pattern"] != router.PatternSupervisor {
		t.Fatalf("routing.decided %v, want the supervisor pattern", r)
	}
	if sel := handlerstest.AuditPayloads(t, seen, "agent.selected"); len(sel) != 1 ||
		fmt.Sprint(sel[0]["members"]) != "[agent-researcher agent-writer]" {
		t.Fatalf("agent.selected %v, want its two members", sel)
	}

	// The decomposition was offered the sub-agents with their tools.
	sup := model.Requests(llm.TaskSupervise)
	if len(sup) != 1 {
		t.Fatalf("%d decompositions, want 1", len(sup))
	}
	offered := sup[0].Input.(llm.SuperviseInput).Agents
	if len(offered) != 2 || offered[0].ID != "agent-researcher" || !slices.Equal(offered[0].Tools, []string{demo.SkillOutletList}) ||
		offered[1].ID != "agent-writer" || !slices.Equal(offered[1].Tools, []string{demo.SkillEngagementAnalytics}) {
		t.Fatalf("the decomposition was offered %+v", offered)
	}

	// The fan-out records each lane's sub-agent; so do the lanes' steps.
	fan := handlerstest.AuditPayloads(t, seen, "fanout.started")
	if len(fan) != 1 {
		t.Fatalf("%d fanout.started, want 1", len(fan))
	}
	assigned := map[string]string{}
	for _, l := range fan[0]["lanes"].([]any) {
		lane := l.(map[string]any)
		assigned[lane["goal"].(string)] = lane["agent_id"].(string)
	}
	if assigned[researchGoal] != "agent-researcher" || assigned[writeGoal] != "agent-writer" {
		t.Fatalf("fan-out assigned %v", assigned)
	}
	byTask := map[string]orch.Step{}
	for _, s := range res.Steps {
		byTask[s.TaskID] = s
		if want := assigned[s.Task]; s.LaneAgent() != want {
			t.Fatalf("step %d (%s) runs as %q, want %q", s.Index, s.Task, s.LaneAgent(), want)
		}
	}

	// Each lane's turns see its sub-agent and its tools only.
	want := map[string]struct{ tool, prompt, model string }{
		researchGoal: {demo.SkillOutletList, "You research outlets; cite their ids.", "claude-researcher"},
		writeGoal:    {demo.SkillEngagementAnalytics, "You write up engagement in one line.", "claude-writer"},
	}
	acts := model.Requests(llm.TaskAct)
	if len(acts) != 5 {
		t.Fatalf("%d act turns, want 5", len(acts))
	}
	for i, req := range acts {
		w := want[laneOf(req)]
		if got := toolNames(req); !slices.Equal(got, []string{w.tool}) {
			t.Errorf("turn %d of lane %q offered %v, want only %s", i+1, laneOf(req), got, w.tool)
		}
		if !slices.ContainsFunc(req.Messages, func(m llm.Message) bool {
			return strings.Contains(m.Content, w.prompt) && strings.Contains(m.Content, "a sub-agent of agent Lead")
		}) {
			t.Errorf("turn %d of lane %q does not see its sub-agent's instructions %q", i+1, laneOf(req), w.prompt)
		}
		if req.Model != w.model {
			t.Errorf("turn %d of lane %q asks for model %q, want its sub-agent's %s", i+1, laneOf(req), req.Model, w.model)
		}
	}

	// The researcher's call of the writer's tool was refused; each lane
	// called only its own sub-agent's tool.
	denied := handlerstest.AuditPayloads(t, seen, "skill.denied")
	if len(denied) != 1 || fmt.Sprint(denied[0]["allowed_skills"]) != "["+demo.SkillOutletList+"]" {
		t.Fatalf("skill.denied %v, want the researcher's one call of the writer's tool", denied)
	}
	calls := skillCallsByStep(t, seen)
	if len(calls) != 2 {
		t.Fatalf("skill calls by step %v, want both lanes'", calls)
	}
	for task, skills := range calls {
		s := byTask[task]
		if w := want[s.Task].tool; !slices.Equal(skills, []string{w}) {
			t.Errorf("lane %q (%s) called %v, want only %s", s.Task, s.LaneAgent(), skills, w)
		}
	}

	// The supervisor synthesises, with its own settings, from both lanes.
	syn := model.Requests(llm.TaskSynthesize)
	if len(syn) != 1 || len(syn[0].Input.(llm.SynthInput).Outputs) != 2 || syn[0].Model != "claude-lead" {
		t.Fatalf("synthesis requests %+v, want one of the supervisor's over both lanes", syn)
	}
	if rep := runctl.ReplayRun("run-lead", seen, runctl.ReplayControls{}); rep.Decisions == 0 || len(rep.Divergences) != 0 ||
		rep.Code != orch.CodeSuccess || !slices.ContainsFunc(rep.Verdicts, func(v string) bool { return strings.Contains(v, "@agent-writer") }) {
		t.Fatalf("replay %+v", rep)
	}
}

// TestSupervisorAgent_DecompositionOutsideItsSubAgentsIsRepaired: a
// decomposition that assigns a lane to an agent the supervisor does not
// name, or gives a lane a skill its sub-agent lacks, is sent back to the
// model, which is told why; the repaired lanes run.
func TestSupervisorAgent_DecompositionOutsideItsSubAgentsIsRepaired(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	supervisorTeam(t, env)
	model := routedTo("research", router.PatternReact)
	model.On(llm.TaskSupervise,
		decomposition(t, llm.LaneGoal{Goal: researchGoal, Skills: []string{demo.SkillOutletList}, AgentID: "agent-intruder"}),
		decomposition(t, llm.LaneGoal{Goal: researchGoal, Skills: []string{demo.SkillEngagementAnalytics}, AgentID: "agent-researcher"}),
		decomposition(t, llm.LaneGoal{Goal: researchGoal, Skills: []string{demo.SkillOutletList}, AgentID: "agent-researcher"}))
	f := patternFlow(t, env, model)
	res, _ := f.drive(t, agentRun(t, "run-lead-bad", "agent-lead", handlerstest.Session, "Review the active outlets"))
	if res.TerminalCode != orch.CodeSuccess || len(res.Steps) != 1 || res.Steps[0].LaneAgent() != "agent-researcher" {
		t.Fatalf("run ended %s with steps %+v: want the repaired lane only", res.TerminalCode, res.Steps)
	}
	sup := model.Requests(llm.TaskSupervise)
	if len(sup) != 3 ||
		!strings.Contains(handlerstest.LastMessage(sup[1]), `assigned to agent "agent-intruder"`) ||
		!strings.Contains(handlerstest.LastMessage(sup[2]), `not one of agent agent-researcher's tools`) {
		t.Fatalf("%d decompositions; the model must be told of the intruder, then of the writer's tool", len(sup))
	}
}
