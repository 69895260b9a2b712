package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestSupervisor_TenLanesRunInParallelOnTwoExecutorProcesses: a
// supervisor run fans out 10 lanes whose skill call each takes 1 s; with
// two executor processes the lanes run side by side, so the run takes
// little more than one lane, not ten. The planner's model is a scripted
// OpenAI-compatible server (the decomposition); every other role runs the
// offline model.
func TestSupervisor_TenLanesRunInParallelOnTwoExecutorProcesses(t *testing.T) {
	const lanes = 10
	goals := make([]llm.LaneGoal, lanes)
	for i := range goals {
		status := []string{"active", "inactive"}[i%2]
		goals[i] = llm.LaneGoal{Goal: fmt.Sprintf("List the %s outlets (dimension %d)", status, i+1), Skills: []string{demo.SkillOutletList}}
	}
	b, _ := json.Marshal(llm.SuperviseOutput{Lanes: goals})
	chat := llmtest.NewChatServer([]llmtest.Exchange{{Task: llm.TaskSupervise, Content: string(b), Times: -1}})
	t.Cleanup(chat.Close)
	c := newCluster(t, demo.Config{Latency: time.Second}, "MODEL_PLANNER=openai:test-model", "MODEL_BASE_URL="+chat.URL,
		"MODEL_API_KEY="+modelKey, "MODEL_MAX_RETRIES=1")
	c.startAll(2)

	start := time.Now()
	res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-lanes",
		Message: "Run a multi-dimensional risk analysis of the outlets across independent dimensions"})
	wall := time.Since(start)
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	if len(res.Steps) != lanes {
		t.Fatalf("the run has %d steps, want %d lanes", len(res.Steps), lanes)
	}
	for _, s := range res.Steps {
		if s.Loop == nil || s.Loop.SessionID == "" {
			t.Fatalf("step %d is not a lane: %+v", s.Index, s)
		}
	}
	if n := c.skills.Calls(demo.SkillOutletList); n != lanes {
		t.Fatalf("outlet_list ran %d times, want once per lane", n)
	}
	t.Logf("10 lanes of 1 s each: %s wall time", wall)
	if wall > 5*time.Second {
		t.Fatalf("10 lanes of 1 s took %s: they did not run in parallel", wall)
	}
}
