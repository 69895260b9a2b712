package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/skills/demo"
)

// budgetTask is the budget scenario's task: a ReACT loop that calls
// outlet_list twice.
const budgetTask = "Count the outlets by each status"

// resumeScript is the model of TestResume_ClarifyAndBudgetGatesOverTheCLI:
// the routing model first asks which outlets are meant, then, with the
// answer, routes the demo conversation; then a ReACT loop whose second
// call the budget refuses, asked again once the budget is released.
func resumeScript(t *testing.T) []llmtest.Exchange {
	t.Helper()
	conv, err := llmtest.LoadScript(filepath.Join("testdata", "openai", "demo_conversation.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(status string) []llmtest.ScriptedCall {
		return []llmtest.ScriptedCall{{Name: demo.SkillOutletList, Arguments: json.RawMessage(`{"status":"` + status + `"}`)}}
	}
	script := []llmtest.Exchange{{Task: llm.TaskRoute,
		Content: `{"task_type":"general","pattern":"plan-then-execute","reason":"two readings","clarify":"Which outlets: the active ones or all of them?"}`}}
	script = append(script, conv...)
	return append(script,
		llmtest.Exchange{Task: llm.TaskRoute, Content: `{"task_type":"research","pattern":"react","reason":"a loop over statuses"}`},
		llmtest.Exchange{Task: llm.TaskAct, When: budgetTask, ToolCalls: call("active")},
		llmtest.Exchange{Task: llm.TaskAct, When: budgetTask, ToolCalls: call("inactive")}, // refused: one tool call
		llmtest.Exchange{Task: llm.TaskAct, When: budgetTask, ToolCalls: call("inactive")}, // asked again, released
		llmtest.Exchange{Task: llm.TaskAct, When: budgetTask,
			Content: `{"status":"complete","label":"answer","data":{"answer":"8 active, 3 inactive"}}`},
		llmtest.Exchange{Task: llm.TaskSynthesize, Content: "8 outlets are active and 3 inactive."})
}

// TestResume_ClarifyAndBudgetGatesOverTheCLI runs the role binaries as
// processes against a scripted model provider and drives them with the
// agentbus CLI. A task whose intent is ambiguous parks at a clarify gate
// (agentbus run exits 3 with the question); the session's next message
// (agentbus run again) is the answer, and answers with the same run's
// result. A research run limited to one tool call, whose tenant releases
// budgets, parks at a budget gate; agentbus approve --extend lets it
// finish SUCCESS, the first call not made again.
func TestResume_ClarifyAndBudgetGatesOverTheCLI(t *testing.T) {
	chat := llmtest.NewChatServer(resumeScript(t))
	t.Cleanup(chat.Close)
	c := newCluster(t, demo.Config{}, modelEnv(t, chat)...)
	_, js := connect(t, c.nats)
	presetConfig(t, js, router.ConfigKeyBudgets, []byte(`{"task_types":{"research":{"tool_calls":1}},"release":{"*":{"gate_ttl_s":300}}}`))
	c.startAll(1)
	agentbus := filepath.Join(c.bin, "agentbus")
	cli := func(args ...string) (int, string) {
		t.Helper()
		return runBinary(t, agentbus, []string{"AGENTBUS_URL=" + c.ingURL}, args...)
	}

	// Clarify: asked, then answered by the session's next message.
	code, out := cli("run", "--tenant", "demo", "--session", "sess-clarify", "--stream=false", "Rank the outlets")
	if code != 3 || !strings.Contains(out, "The run asks: Which outlets: the active ones or all of them?") ||
		!strings.Contains(out, "agentbus run --tenant demo --session sess-clarify") {
		t.Fatalf("agentbus run (asked): exit %d\n%s", code, out)
	}
	asked := regexp.MustCompile(`agentbus approve --tenant demo --answer "\.\.\." (\S+) (\S+)`).FindStringSubmatch(out)
	if asked == nil {
		t.Fatalf("no answer command in\n%s", out)
	}
	code, out = cli("run", "--tenant", "demo", "--session", "sess-clarify", "--stream=false", "the active ones")
	if code != 0 || !strings.Contains(out, "Central Station (out-002)") || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("agentbus run (the answer): exit %d\n%s", code, out)
	}
	routes := 0
	for _, r := range chat.Received() {
		if r.Task == llm.TaskRoute {
			routes++
			if routes == 2 && !strings.Contains(string(r.Raw), "Answered: the active ones") {
				t.Errorf("the second routing request does not carry the answer")
			}
		}
	}

	// Budget: parked, then extended.
	code, out = cli("run", "--tenant", "demo", "--session", "sess-budget", "--stream=false", budgetTask)
	if code != 3 || !strings.Contains(out, "budget ran out") {
		t.Fatalf("agentbus run (budget): exit %d\n%s", code, out)
	}
	extend := regexp.MustCompile(`agentbus approve --tenant demo --extend tool_calls=10 (\S+) (\S+)`).FindStringSubmatch(out)
	if extend == nil {
		t.Fatalf("no extend command in\n%s", out)
	}
	if n := c.skills.Calls(demo.SkillOutletList); n != 2 {
		t.Fatalf("outlet_list ran %d times before the budget gate's decision, want 2 (one per run)", n)
	}
	code, out = cli("approve", "--tenant", "demo", "--user", "ops", "--extend", "tool_calls=2", extend[1], extend[2])
	if code != 0 || !strings.Contains(out, "SUCCESS") || !strings.Contains(out, "8 outlets are active and 3 inactive") {
		t.Fatalf("agentbus approve --extend: exit %d\n%s", code, out)
	}
	if n := c.skills.Calls(demo.SkillOutletList); n != 3 {
		t.Errorf("outlet_list ran %d times in all, want 3: the budget run's first call was made again", n)
	}
}
