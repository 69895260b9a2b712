//go:build localmodel

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/openai"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// The local-model tier: `make test-local-model` starts llama-cpp-python's
// OpenAI-compatible server with SmolLM2-135M-Instruct (deploy/local-model)
// and runs this file, built only with -tags localmodel, against it.

// localTasks are the demo's tasks, in ordinary phrasings.
var localTasks = []string{
	demoTask,
	"How many outlets do we have?",
	"Which outlets are closed or inactive?",
	"What categories are on the menu?",
	"What is the engagement score of Harbour Front?",
}

// localRuns is how many runs the tier makes, over localTasks in turn.
const localRuns = 20

// localBudget is each run's budget: what a run of a model this small may
// spend, in calls, tokens and seconds. Every run must end within it.
var localBudget = orch.Vector{orch.DimModelCalls: 16, orch.DimInputTokens: 160_000, orch.DimOutputTokens: 8_000,
	orch.DimWallClockS: 240, orch.DimRetries: 8, orch.DimReflectionPasses: 2}

// localSlack is how far past its wall-clock budget a run may answer: the
// budget is checked before each call, so the call in flight may finish.
const localSlack = 90 * time.Second

// structuredTasks are the tasks whose calls ask for JSON or tool calls:
// each must record the structured mode it was made in.
var structuredTasks = []llm.Task{llm.TaskRoute, llm.TaskPlan, llm.TaskAct, llm.TaskExtract, llm.TaskSupervise}

// TestLocalModel_DemoTasksEndWithinBudget: `agentbus up` with
// MODEL=openai:smollm2 against the real local server. A model this small
// plans poorly; what must hold is that every run ends with a terminal
// code within its budget and time, every structured call records the mode
// the provider settled on (llama-cpp-python refuses json_schema and takes
// json_object), and the run's usage is what its model calls add up to.
func TestLocalModel_DemoTasksEndWithinBudget(t *testing.T) {
	base := os.Getenv("LOCAL_MODEL_URL")
	if base == "" {
		t.Fatal("LOCAL_MODEL_URL is not set: run this tier with `make test-local-model`, which starts the server")
	}
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatalf("the local model server at %s does not answer: %v", base, err)
	}
	resp.Body.Close()
	url, _ := startUp(t, "MODEL=openai:smollm2", "MODEL_BASE_URL="+base, "MODEL_API_KEY=local",
		"MODEL_MAX_TOKENS=384", "MODEL_TIMEOUT=90s", "MODEL_MAX_RETRIES=1", "ACK_WAIT=60s")

	codes := map[string]int{}
	modes := map[string]int{}
	for i := range localRuns {
		task := localTasks[i%len(localTasks)]
		start := time.Now()
		res := localRun(t, url, fmt.Sprintf("s-local-%d", i), task)
		took := time.Since(start)
		codes[res.TerminalCode]++
		t.Logf("run %2d %-55q %-18s %5.1fs %2d calls %6d in %5d out", i+1, task, res.TerminalCode, took.Seconds(),
			res.Usage.Calls, res.Usage.InputTokens, res.Usage.OutputTokens)
		if !orch.ValidCode(res.TerminalCode) {
			t.Errorf("run %d ended with %q, not a terminal code (%s)", i+1, res.TerminalCode, res.Response)
		}
		if limit := time.Duration(localBudget[orch.DimWallClockS])*time.Second + localSlack; took > limit {
			t.Errorf("run %d took %v, over its %v", i+1, took, limit)
		}
		if res.Usage.Calls > int(localBudget[orch.DimModelCalls]) || res.Usage.InputTokens > int(localBudget[orch.DimInputTokens]) ||
			res.Usage.OutputTokens > int(localBudget[orch.DimOutputTokens]) {
			t.Errorf("run %d spent %+v, over its budget %v", i+1, res.Usage, localBudget)
		}
		if res.PlanID == "" {
			continue // ended before it was planned (rejected at the door)
		}
		calls := modelCalls(t, url, res)
		var sum llm.Usage
		for _, c := range calls {
			sum = sum.Add(c.Usage())
			if c.Provider == "openai" && slices.Contains(structuredTasks, c.Task) {
				modes[c.StructuredMode]++
				if c.StructuredMode == "" {
					t.Errorf("run %d: a %s call records no structured mode: %+v", i+1, c.Task, c)
				}
			}
		}
		if sum.InputTokens != res.Usage.InputTokens || sum.OutputTokens != res.Usage.OutputTokens {
			t.Errorf("run %d: usage %+v, its model calls add up to %+v", i+1, res.Usage, sum)
		}
	}
	t.Logf("terminal codes: %v; structured modes of the calls: %v", codes, modes)
	if modes[string(openai.ModeJSONObject)] == 0 {
		t.Errorf("no call was made as json_object, the mode llama-cpp-python takes: %v", modes)
	}
}

// localRun runs task with the tier's budget and a deadline past it.
func localRun(t *testing.T, url, session, task string) orch.RunResult {
	t.Helper()
	limit := time.Duration(localBudget[orch.DimWallClockS])*time.Second + localSlack
	ctx, cancel := context.WithTimeout(context.Background(), limit+30*time.Second)
	defer cancel()
	res, err := runclient.NewHTTP(url, nil).Run(ctx, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: session,
		Message: task, Budget: localBudget})
	if err != nil {
		t.Fatalf("%q: %v", task, err)
	}
	return res
}
