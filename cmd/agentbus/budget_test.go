package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestBudget_FourLanesOnTwoExecutorProcessesNeverPassTheCap: a supervisor
// run fans out 4 lanes over 2 executor processes, and every lane's model
// keeps calling a skill. The run's budget allows 6 tool calls in all;
// split 4 ways that leaves each lane a share of none, so the lanes draw
// every call from their group's pool by compare-and-swap, and however
// their draws interleave across processes the run ends BUDGET_EXHAUSTED
// on tool_calls, the pool never passes 6 and the Skill Service never
// runs the skill more than 6 times. Both models (the planner's
// decomposition and the executor's act turns) are scripted
// OpenAI-compatible servers.
func TestBudget_FourLanesOnTwoExecutorProcessesNeverPassTheCap(t *testing.T) {
	const (
		lanes    = 4
		capCalls = 6
	)
	goals := make([]llm.LaneGoal, lanes)
	for i := range goals {
		goals[i] = llm.LaneGoal{Goal: fmt.Sprintf("Keep listing the active outlets (dimension %d)", i+1),
			Skills: []string{demo.SkillOutletList}}
	}
	b, _ := json.Marshal(llm.SuperviseOutput{Lanes: goals})
	chat := llmtest.NewChatServer([]llmtest.Exchange{
		{Task: llm.TaskSupervise, Content: string(b), Times: -1},
		{Task: llm.TaskAct, ToolCalls: []llmtest.ScriptedCall{{Name: demo.SkillOutletList, Arguments: json.RawMessage(`{"status":"active"}`)}},
			Times: -1},
	})
	t.Cleanup(chat.Close)
	c := newCluster(t, demo.Config{Latency: 200 * time.Millisecond}, "MODEL_PLANNER=openai:test-model",
		"MODEL_EXECUTOR=openai:test-model", "MODEL_BASE_URL="+chat.URL, "MODEL_API_KEY="+modelKey, "MODEL_MAX_RETRIES=1",
		"REPEAT_CALL_LIMIT=100")
	_, js := connect(t, c.nats)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	presetConfig(t, js, router.ConfigKeyBudgets, []byte(fmt.Sprintf(`{"defaults":{"tool_calls":%d}}`, capCalls)))
	procs := c.startAll(2)

	start := time.Now()
	res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-budget",
		Message: "Run a multi-dimensional risk analysis of the outlets across independent dimensions"})
	t.Logf("the run ended %s in %s: %s", res.TerminalCode, time.Since(start), res.Detail)
	if res.TerminalCode != orch.CodeBudgetExhausted {
		t.Fatalf("run ended %s, want %s: %s (detail %s)", res.TerminalCode, orch.CodeBudgetExhausted, res.Response, res.Detail)
	}
	if !detailNames(res.Detail, string(orch.DimToolCalls)) {
		t.Fatalf("the run's detail does not name the dimension %s: %s", orch.DimToolCalls, res.Detail)
	}
	if res.RunID == "" {
		t.Fatal("the result has no run id")
	}

	// The ledger: 6 tool calls split 4 ways leave every lane a share of
	// none, so each call was drawn from the group's pool, one entry of
	// the budgets bucket moved by compare-and-set from both processes.
	budgets, err := js.KeyValue(ctx, ledger.BucketBudgets)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := budgets.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var used float64
	pools := 0
	for k := range keys.Keys() {
		if !strings.Contains(k, res.RunID) {
			continue
		}
		e, err := budgets.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var pool struct {
			Drawn orch.Vector `json:"drawn"`
		}
		if err := json.Unmarshal(e.Value(), &pool); err != nil {
			t.Fatalf("pool %s: %v", k, err)
		}
		t.Logf("pool %s: %v", k, pool.Drawn)
		used += pool.Drawn[orch.DimToolCalls]
		pools++
	}
	if pools == 0 {
		t.Fatal("no group pool was drawn from")
	}
	if used > capCalls {
		t.Fatalf("the lanes drew %g tool calls, past the cap of %d", used, capCalls)
	}
	if used < lanes {
		t.Fatalf("the lanes drew %g tool calls, want at least one per lane (%d)", used, lanes)
	}
	if n := c.skills.Calls(demo.SkillOutletList); n > capCalls {
		t.Fatalf("the Skill Service ran %s %d times, past the cap of %d", demo.SkillOutletList, n, capCalls)
	} else {
		t.Logf("the Skill Service ran %s %d times", demo.SkillOutletList, n)
	}

	// How the lanes' turns spread over the two executor processes (the
	// logging middleware logs each handled event with its run id).
	for _, name := range []string{"executor1", "executor2"} {
		handled := 0
		for _, line := range strings.Split(procs[name].logs.String(), "\n") {
			if strings.Contains(line, `"handled"`) && strings.Contains(line, res.RunID) {
				handled++
			}
		}
		// Which process takes which turn is the consumer's choice: the
		// spread is logged, the cap is what the test holds the ledger to.
		t.Logf("%s handled %d events of the run", name, handled)
	}
}

// detailNames reports whether a run's detail carries a "dimension" field
// equal to dim, at any depth.
func detailNames(detail json.RawMessage, dim string) bool {
	var v any
	if json.Unmarshal(detail, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			if x["dimension"] == dim {
				return true
			}
			for _, y := range x {
				if walk(y) {
					return true
				}
			}
		case []any:
			for _, y := range x {
				if walk(y) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
