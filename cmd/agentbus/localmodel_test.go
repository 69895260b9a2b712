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

// localBudget is each run's budget: what a run of a model this small may
// spend, in calls, tokens and seconds. Every run must end within it.
var localBudget = orch.Vector{orch.DimModelCalls: 16, orch.DimInputTokens: 160_000, orch.DimOutputTokens: 8_000,
	orch.DimWallClockS: 180, orch.DimRetries: 8, orch.DimReflectionPasses: 2}

// localSlack is how far past its wall-clock budget a run may answer: the
// budget is checked before each call, so the call in flight (at most
// MODEL_TIMEOUT) may finish.
const localSlack = 100 * time.Second

// structuredTasks are the tasks whose calls ask for JSON or tool calls:
// each must record the structured mode it was made in.
var structuredTasks = []llm.Task{llm.TaskRoute, llm.TaskPlan, llm.TaskAct, llm.TaskExtract, llm.TaskSupervise}

// localSetups are the tier's deployments and how many runs each makes (20
// in all). With every role on SmolLM2 runs rarely get past routing (its
// answer names no configured task type); with the router and planner
// offline, the executor's tool calls and the synthesis go to SmolLM2,
// through the tool-call envelope.
var localSetups = []struct {
	name string
	env  []string
	runs int
	want llm.Task // a task whose calls must have gone to SmolLM2 as json_object
}{
	{"every role", nil, 12, llm.TaskRoute},
	{"executor and synthesiser", []string{"MODEL_ROUTER=offline", "MODEL_PLANNER=offline"}, 8, llm.TaskAct},
}

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
	for _, setup := range localSetups {
		t.Run(setup.name, func(t *testing.T) {
			url, _ := startUp(t, append([]string{"MODEL=openai:smollm2", "MODEL_BASE_URL=" + base, "MODEL_API_KEY=local",
				"MODEL_MAX_TOKENS=384", "MODEL_TEMPERATURE=0", "MODEL_TIMEOUT=90s", "MODEL_MAX_RETRIES=1", "ACK_WAIT=60s",
				"DEFAULT_DAILY_TOKENS=0"}, setup.env...)...)
			codes, modes := map[string]int{}, map[string]int{}
			for i := range setup.runs {
				checkLocalRun(t, url, i, localTasks[i%len(localTasks)], codes, modes)
			}
			t.Logf("terminal codes: %v; structured modes of the calls: %v", codes, modes)
			if want := string(setup.want) + ":" + string(openai.ModeJSONObject); modes[want] == 0 {
				t.Errorf("no %s call was made as json_object, the mode llama-cpp-python takes: %v", setup.want, modes)
			}
		})
	}
}

// checkLocalRun makes run i of task and checks it: a terminal code, within
// its budget and time, every structured call's mode recorded, the usage
// its calls add up to.
func checkLocalRun(t *testing.T, url string, i int, task string, codes, modes map[string]int) {
	t.Helper()
	start := time.Now()
	res := localRun(t, url, fmt.Sprintf("s-local-%d", i), task)
	took := time.Since(start)
	codes[res.TerminalCode]++
	t.Logf("run %2d %-53q %-18s %5.1fs %2d calls %6d in %5d out: %.120s", i+1, task, res.TerminalCode, took.Seconds(),
		res.Usage.Calls, res.Usage.InputTokens, res.Usage.OutputTokens, res.Response)
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
		return // ended before it was planned (rejected at the door)
	}
	var sum llm.Usage
	for _, c := range modelCalls(t, url, res) {
		sum = sum.Add(c.Usage())
		if c.Provider == "openai" && slices.Contains(structuredTasks, c.Task) {
			modes[string(c.Task)+":"+c.StructuredMode]++
			if c.StructuredMode == "" {
				t.Errorf("run %d: a %s call records no structured mode: %+v", i+1, c.Task, c)
			}
		}
	}
	if sum.InputTokens != res.Usage.InputTokens || sum.OutputTokens != res.Usage.OutputTokens {
		t.Errorf("run %d: usage %+v, its model calls add up to %+v", i+1, res.Usage, sum)
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
