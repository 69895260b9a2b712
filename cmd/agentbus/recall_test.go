package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
)

// recallScript is a scripted OpenAI-compatible model for two runs of a
// task about "my home city": routed and planned as one outlet_list step,
// then answered from the fact about the home city when the synthesis
// request carries it, and otherwise with what it lacks.
func recallScript() []llmtest.Exchange {
	plan := `{"steps":[{"step":1,"task":"List the active outlets with their city","skills":["outlet_list"],` +
		`"return_spec":{"shape":{"type":"object","properties":{"outlets":{"type":"array","items":{"type":"object",` +
		`"properties":{"outlet_id":{"type":"string"},"name":{"type":"string"},"city":{"type":"string"}}}}},` +
		`"required":["outlets"]},"reason":"the answer names the outlets of a city"}}]}`
	answer := `{"status":"complete","label":"outlets","data":{"outlets":[` +
		`{"outlet_id":"out-001","name":"Harbour Front","city":"Sydney"},` +
		`{"outlet_id":"out-002","name":"Central Station","city":"Melbourne"}]}}`
	call := llmtest.Exchange{Task: llm.TaskAct, ToolCalls: []llmtest.ScriptedCall{{Name: "outlet_list", Arguments: []byte(`{"status":"active"}`)}}}
	done := llmtest.Exchange{Task: llm.TaskAct, Content: answer}
	return []llmtest.Exchange{
		{Task: llm.TaskRoute, Times: -1, Content: `{"task_type":"general","pattern":"plan-then-execute","reason":"outlets of a city"}`},
		{Task: llm.TaskPlan, Times: -1, Content: plan},
		call, done, call, done,
		{Task: llm.TaskSynthesize, When: "My home city is Melbourne", Content: "In Melbourne, your home city: Central Station."},
		{Task: llm.TaskSynthesize, Content: "I do not know which city is your home city."},
	}
}

// TestRecall_AFactAddedWithTheCLIAnswersARealModelsRun: `agentbus up` on
// a scripted OpenAI-compatible model. A fact added with `agentbus memory
// add` for user u1 of tenant demo (and one for a user of the same id in
// another tenant) reaches the model in the next run of u1, in another
// session: the plan, act and synthesis requests carry it as data under
// its id, the answer uses it, and the trace records memory.recalled. The
// first run, before the fact, is never shown the other tenant's fact.
// `agentbus memory query` finds the fact.
func TestRecall_AFactAddedWithTheCLIAnswersARealModelsRun(t *testing.T) {
	chat := llmtest.NewChatServer(recallScript())
	t.Cleanup(chat.Close)
	url, _ := startUp(t, modelEnv(t, chat)...)
	cli := filepath.Join(binaries(t), "agentbus")
	const task = "Which active outlets are in my home city?"
	if code, out := runBinary(t, cli, nil, "memory", "add", "--url", url, "--tenant", "other", "--user", "u1",
		"--label", "home_city", "My home city is Sydney."); code != 0 {
		t.Fatalf("agentbus memory add (other tenant) exited %d: %s", code, out)
	}
	client := runclient.NewHTTP(url, nil)
	run := func(session string) orch.RunResult {
		t.Helper()
		res, err := client.Run(context.Background(), orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: session, Message: task})
		if err != nil || res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run in %s: %+v, %v (unmatched model requests: %v)", session, res, err, chat.Unmatched())
		}
		return res
	}
	first := run("s-recall-1")
	if !strings.HasPrefix(first.Response, "I do not know") {
		t.Fatalf("the first run answered %q", first.Response)
	}
	seen := len(chat.Received())
	for _, r := range chat.Received() {
		if strings.Contains(string(r.Raw), "Sydney.") {
			t.Fatalf("the %s request of tenant demo's run carries the other tenant's fact", r.Task)
		}
	}

	code, out := runBinary(t, cli, nil, "memory", "add", "--url", url, "--tenant", "demo", "--user", "u1",
		"--label", "home_city", "My home city is Melbourne.")
	if code != 0 || !strings.Contains(out, "remembered demo:@user:u1:home_city (user scope, until ") {
		t.Fatalf("agentbus memory add exited %d: %s", code, out)
	}
	code, out = runBinary(t, cli, nil, "memory", "query", "--url", url, "--tenant", "demo", "--user", "u1", "--scope", "user",
		"home city")
	if code != 0 || !strings.Contains(out, "demo:@user:u1:home_city  My home city is Melbourne.") {
		t.Fatalf("agentbus memory query exited %d: %s", code, out)
	}

	second := run("s-recall-2")
	if second.Response != "In Melbourne, your home city: Central Station." {
		t.Fatalf("the run after the fact answered %q", second.Response)
	}
	shown := map[llm.Task]bool{}
	for _, r := range chat.Received()[seen:] {
		body := string(r.Raw)
		if strings.Contains(body, "My home city is Melbourne.") && strings.Contains(body, "demo:@user:u1:home_city") {
			shown[r.Task] = true
		}
		if strings.Contains(body, "Sydney.") {
			t.Errorf("the %s request carries the other tenant's fact", r.Task)
		}
	}
	if !shown[llm.TaskPlan] || !shown[llm.TaskAct] || !shown[llm.TaskSynthesize] {
		t.Errorf("the fact, under its id, reached the model's requests %v; want plan, act and synthesis", shown)
	}

	var trace struct {
		Events []store.Event `json:"events"`
	}
	eventually(t, 15*time.Second, "the trace to hold memory.recalled", func() bool {
		trace.Events = nil
		if !fetchJSON(t, url+"/agent/plans/"+second.PlanID+"/trace", "demo", &trace) {
			return false
		}
		for _, e := range trace.Events {
			if e.EventType != "memory.recalled" {
				continue
			}
			var p struct {
				Memories []struct {
					ID    string  `json:"id"`
					Score float32 `json:"score"`
				} `json:"memories"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			for _, m := range p.Memories {
				if m.ID == "demo:@user:u1:home_city" && m.Score > 0 {
					return true
				}
			}
			t.Fatalf("memory.recalled %s lacks the fact", e.Payload)
		}
		return false
	})
}
