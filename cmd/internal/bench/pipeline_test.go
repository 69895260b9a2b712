package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// TestPipelineRunIsFiveSteps: the run every figure measures is five
// sequential steps, stage k fed by stage k-1, all completed and
// validated, whatever the offline planner would choose for the task.
func TestPipelineRunIsFiveSteps(t *testing.T) {
	ctx := context.Background()
	d := pipelineDeployment(t)
	res, _, err := d.run(ctx, pipeline.Task)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != pipeline.Stages {
		t.Fatalf("%d steps, want %d: %+v", len(res.Steps), pipeline.Stages, res.Steps)
	}
	for i, s := range res.Steps {
		k := i + 1
		if s.Status != orch.StepComplete || !s.Validated || len(s.Skills) != 1 || s.Skills[0] != fmt.Sprintf("stage%d", k) {
			t.Errorf("step %d: %s validated=%v skills %v", k, s.Status, s.Validated, s.Skills)
		}
		if k > 1 && (len(s.DependsOn) != 1 || s.DependsOn[0] != res.Steps[i-1].Index) {
			t.Errorf("step %d depends on %v, want step %d", k, s.DependsOn, res.Steps[i-1].Index)
		}
	}
	// Stage 4 fed stage 5 its ids, so the answer carries stage 5's items.
	if !strings.Contains(res.Response, "s5-1") {
		t.Errorf("the answer does not carry stage 5's results: %q", res.Response)
	}
}

// TestStageTurn: a stage's first turn calls its skill with the ids of
// the stage before, its second answers with the ids of the call's result
// (the last stage with its results as they are), and any other turn is
// left to the inner model.
func TestStageTurn(t *testing.T) {
	skill := func(k int) []llm.SkillInfo { return []llm.SkillInfo{{Name: fmt.Sprintf("stage%d", k)}} }
	in := llm.ActInput{Skills: skill(2), Inputs: map[string]json.RawMessage{"s1_ids": json.RawMessage(`{"s1_ids":["a","b"]}`)}}
	msg, ok := stageTurn(in, nil)
	if !ok || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Name != "stage2" || string(msg.ToolCalls[0].Arguments) != `{"s1_ids":["a","b"]}` {
		t.Fatalf("first turn: %v %+v", ok, msg)
	}
	p := pipeline.NewSkills(0)
	result, err := p.Call(context.Background(), "bench", "stage2", msg.ToolCalls[0].Arguments, "")
	if err != nil {
		t.Fatal(err)
	}
	history := []llm.Message{msg, {Role: llm.RoleTool, Content: string(result), ToolCallID: "call-1"}}
	msg, ok = stageTurn(in, history)
	var out llm.ActOutput
	if !ok || json.Unmarshal([]byte(msg.Content), &out) != nil {
		t.Fatalf("second turn: %v %+v", ok, msg)
	}
	if out.Status != "complete" || out.Label != "s2_ids" || !strings.HasPrefix(string(out.Data), `{"s2_ids":["s2-1","s2-2",`) {
		t.Errorf("second turn answered %+v (%s)", out, out.Data)
	}
	last := llm.ActInput{Skills: skill(5)}
	lastResult := `{"results":[{"item_id":"s5-1"}]}`
	msg, ok = stageTurn(last, []llm.Message{{Role: llm.RoleAssistant}, {Role: llm.RoleTool, Content: lastResult}})
	if !ok || json.Unmarshal([]byte(msg.Content), &out) != nil || out.Label != "results" || string(out.Data) != lastResult {
		t.Errorf("the last stage answered %v %+v", ok, msg)
	}
	for name, c := range map[string]struct {
		in      llm.ActInput
		history []llm.Message
	}{
		"not a stage":          {llm.ActInput{Skills: []llm.SkillInfo{{Name: "search"}}}, nil},
		"no ids from before":   {llm.ActInput{Skills: skill(3)}, nil},
		"a failed call":        {in, []llm.Message{{Role: llm.RoleAssistant}, {Role: llm.RoleTool, Content: "boom", IsError: true}}},
		"a turn after the two": {in, append(history, llm.Message{Role: llm.RoleUser}, llm.Message{Role: llm.RoleTool})},
	} {
		if _, ok := stageTurn(c.in, c.history); ok {
			t.Errorf("%s: scripted, want the inner model's answer", name)
		}
	}
}

// TestLLMShareCountsEveryModelCall: the LLM share finds a run's model
// time in every call of the run, its stages' turns included (their tasks
// name the run's), so the time outside the model is the orchestration's.
func TestLLMShareCountsEveryModelCall(t *testing.T) {
	srv, err := startServer(modes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	share, err := llmShare(context.Background(), srv, 20*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The plan, two turns of each of the five stages and the synthesis at
	// least (the stages' ten were missed when their tasks did not name
	// the run's).
	if share.ModelCalls < 12 {
		t.Errorf("%d model calls a run found, %.0f %% of the run time in the model", share.ModelCalls, 100*share.Share)
	}
}

// pipelineDeployment is every role over TCP, one executor, on the
// benchmark's model and a server of the default sync of its own, closed
// when tb ends.
func pipelineDeployment(tb testing.TB) *deployment {
	tb.Helper()
	srv, err := startServer(modes[0])
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.close)
	d, err := deploy(context.Background(), srv, deployConfig{tcp: true, executors: 1, model: newPipelineModel()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.close)
	return d
}
