package offline_test

import (
	"slices"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills/demo"
)

// A loop (the ReACT pattern's step) chains its skills turn by turn: it
// calls the producer first, feeds its observation to the consumer, and
// answers with the last observation.
func TestOfflineLoopChainsSkillsAndAnswers(t *testing.T) {
	in := llm.ActInput{Task: rankTask, Skills: allDemo(t), ReturnSpec: llm.ReturnSpec{Shape: llm.LoopAnswerShape}}
	first := complete(t, llm.TaskAct, in, nil)
	if len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != demo.SkillOutletList {
		t.Fatalf("first turn = %+v, want a call of %s", first, demo.SkillOutletList)
	}
	history := []llm.Message{first, {Role: llm.RoleTool, ToolCallID: first.ToolCalls[0].ID,
		Content: `{"outlets":[{"outlet_id":"o1","name":"A"},{"outlet_id":"o2","name":"B"}]}`}}
	second := complete(t, llm.TaskAct, in, history)
	if len(second.ToolCalls) != 1 || second.ToolCalls[0].Name != demo.SkillEngagementAnalytics {
		t.Fatalf("second turn = %+v, want a call of %s", second, demo.SkillEngagementAnalytics)
	}
	var args struct {
		IDs []string `json:"outlet_ids"`
	}
	if err := json.Unmarshal(second.ToolCalls[0].Arguments, &args); err != nil || !slices.Equal(args.IDs, []string{"o1", "o2"}) {
		t.Fatalf("engagement_analytics called with %s: want the ids the first call observed", second.ToolCalls[0].Arguments)
	}
	ranked := `{"results":[{"outlet_id":"o2","name":"B","rank":1}]}`
	history = append(history, second, llm.Message{Role: llm.RoleTool, ToolCallID: second.ToolCalls[0].ID, Content: ranked})
	final := complete(t, llm.TaskAct, in, history)
	var out llm.ActOutput
	if err := json.Unmarshal([]byte(final.Content), &out); err != nil || out.Status != "complete" {
		t.Fatalf("final turn = %q, want a complete answer", final.Content)
	}
	if err := schema.Validate(llm.LoopAnswerShape, out.Data); err != nil {
		t.Fatalf("the answer %s is off the loop's contract: %v", out.Data, err)
	}
	var answer struct{ Answer string }
	_ = json.Unmarshal(out.Data, &answer)
	if answer.Answer != ranked {
		t.Fatalf("answer = %q, want the last observation", answer.Answer)
	}
}

// The offline supervisor makes one lane per independent output of the
// task, each with the skills of its chain.
func TestOfflineSuperviseMakesOneLanePerIndependentChain(t *testing.T) {
	superviseOut := func(in llm.SuperviseInput) llm.SuperviseOutput {
		msg := complete(t, llm.TaskSupervise, in, nil)
		if err := schema.Validate(llm.SuperviseSchema, []byte(msg.Content)); err != nil {
			t.Fatalf("offline decomposition is off SuperviseSchema: %v\n%s", err, msg.Content)
		}
		var out llm.SuperviseOutput
		_ = json.Unmarshal([]byte(msg.Content), &out)
		return out
	}
	out := superviseOut(llm.SuperviseInput{Task: rankTask, Skills: allDemo(t), MaxLanes: 4})
	if len(out.Lanes) != 1 || !slices.Equal(out.Lanes[0].Skills, []string{demo.SkillEngagementAnalytics, demo.SkillOutletList}) &&
		!slices.Equal(out.Lanes[0].Skills, []string{demo.SkillOutletList, demo.SkillEngagementAnalytics}) {
		t.Fatalf("lanes = %+v: want one lane with the outlet_list → engagement_analytics chain", out.Lanes)
	}
	// A re-iteration does not repeat a lane that answered.
	again := superviseOut(llm.SuperviseInput{Task: rankTask, Skills: allDemo(t), MaxLanes: 4,
		Completed: []llm.LaneGoal{out.Lanes[0]}})
	if len(again.Lanes) != 0 || again.Infeasible == "" {
		t.Fatalf("re-iteration after every lane answered = %+v, want infeasible", again)
	}
	none := superviseOut(llm.SuperviseInput{Task: "write a poem about the sea", Skills: allDemo(t), MaxLanes: 4})
	if none.Infeasible == "" {
		t.Fatalf("a task no skill fits got lanes %+v", none.Lanes)
	}
}

// For a supervisor agent the offline supervisor assigns each lane to the
// sub-agent whose tools cover its skills (by name and description among
// equals), and a lane keeps only its agent's skills; the assignment is
// the same every time.
func TestOfflineSuperviseAssignsEachLaneToTheSubAgentWithItsTools(t *testing.T) {
	agents := []llm.AgentOption{
		{ID: "agent-writer", Name: "Writer", Description: "Writes up the menu", Tools: []string{demo.SkillMenuCatalog}},
		{ID: "agent-researcher", Name: "Researcher", Description: "Researches the outlets", Tools: []string{demo.SkillOutletList}},
	}
	in := llm.SuperviseInput{Task: "List the active outlets and show the menu catalog", Skills: allDemo(t), MaxLanes: 4, Agents: agents}
	var first string
	for range 3 {
		msg := complete(t, llm.TaskSupervise, in, nil)
		if err := schema.Validate(llm.SuperviseSchema, []byte(msg.Content)); err != nil {
			t.Fatalf("off SuperviseSchema: %v\n%s", err, msg.Content)
		}
		if first == "" {
			first = msg.Content
		} else if msg.Content != first {
			t.Fatalf("decomposition changed: %s, then %s", first, msg.Content)
		}
	}
	var out llm.SuperviseOutput
	_ = json.Unmarshal([]byte(first), &out)
	got := map[string][]string{}
	for _, l := range out.Lanes {
		got[l.AgentID] = l.Skills
	}
	if len(out.Lanes) != 2 || !slices.Equal(got["agent-writer"], []string{demo.SkillMenuCatalog}) ||
		!slices.Equal(got["agent-researcher"], []string{demo.SkillOutletList}) {
		t.Fatalf("lanes %+v: want the menu lane to the writer and the outlets lane to the researcher", out.Lanes)
	}
	// A chain across two agents goes to the one with most of its skills,
	// cut to its tools; tools equal, to the one whose description fits.
	in = llm.SuperviseInput{Task: rankTask, Skills: allDemo(t), MaxLanes: 4, Agents: []llm.AgentOption{
		{ID: "agent-a", Name: "Lister", Tools: []string{demo.SkillOutletList}},
		{ID: "agent-b", Name: "Analyst", Description: "ranks outlets by engagement", Tools: []string{demo.SkillEngagementAnalytics}},
		{ID: "agent-c", Name: "Both", Tools: []string{demo.SkillOutletList, demo.SkillEngagementAnalytics}}}}
	_ = json.Unmarshal([]byte(complete(t, llm.TaskSupervise, in, nil).Content), &out)
	if len(out.Lanes) != 1 || out.Lanes[0].AgentID != "agent-c" || len(out.Lanes[0].Skills) != 2 {
		t.Fatalf("lanes %+v: want the chain to agent-c", out.Lanes)
	}
	in.Agents = in.Agents[:2]
	_ = json.Unmarshal([]byte(complete(t, llm.TaskSupervise, in, nil).Content), &out)
	if len(out.Lanes) != 1 || out.Lanes[0].AgentID != "agent-b" || !slices.Equal(out.Lanes[0].Skills, []string{demo.SkillEngagementAnalytics}) {
		t.Fatalf("lanes %+v: want the chain to agent-b, whose description fits, with its tool only", out.Lanes)
	}
	// No sub-agent with a tool of any lane: nothing to fan out.
	in.Agents = []llm.AgentOption{{ID: "agent-menu", Name: "Menu", Tools: []string{demo.SkillMenuCatalog}}}
	out = llm.SuperviseOutput{}
	_ = json.Unmarshal([]byte(complete(t, llm.TaskSupervise, in, nil).Content), &out)
	if len(out.Lanes) != 0 || !strings.Contains(out.Infeasible, "no sub-agent") {
		t.Fatalf("decomposition %+v, want infeasible", out)
	}
}
