package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestCrashResume_TheWholeDeploymentKilledMidPlan: a 6-step plan (each
// step one slow skill call, each depending on the one before) runs on the
// role binaries. When the third call has reached the Skill Service, every
// process is killed (SIGKILL: no drain, messages unacked mid-hop), the
// nats-server is stopped and started again on its store, and the
// deployment is started again. The run completes
// from where its messages were, and every step's skill was executed once
// (per idempotency key: a call sent again after the crash is answered
// from the first execution, never executed twice).
func TestCrashResume_TheWholeDeploymentKilledMidPlan(t *testing.T) {
	const steps = 6
	plan := llm.PlanOutput{}
	shape := llm.ReturnSpec{Shape: json.RawMessage(`{"type":"object","properties":{"outlet_ids":{"type":"array","items":{"type":"string"}}},"required":["outlet_ids"]}`)}
	for i := 1; i <= steps; i++ {
		s := llm.PlannedStep{Step: i, Task: fmt.Sprintf("List the active outlets, pass %d", i), Skills: []string{demo.SkillOutletList},
			ReturnSpec: shape}
		if i > 1 {
			s.DependsOn = []int{i - 1}
		}
		plan.Steps = append(plan.Steps, s)
	}
	b, _ := json.Marshal(plan)
	chat := llmtest.NewChatServer([]llmtest.Exchange{{Task: llm.TaskPlan, Content: string(b), Times: -1}})
	t.Cleanup(chat.Close)
	c := newCluster(t, demo.Config{Latency: 400 * time.Millisecond}, "MODEL_PLANNER=openai:test-model",
		"MODEL_BASE_URL="+chat.URL, "MODEL_API_KEY="+modelKey, "MODEL_MAX_RETRIES=1")
	_, js := connect(t, c.nats)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	client, err := runclient.New(ctx, js, runclient.Config{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	procs := c.startAll(1)
	pending, err := client.Submit(ctx, orch.RunRequest{RunID: uuid.NewString(), TenantID: "demo", UserID: "u1",
		SessionID: "sess-crash", Message: "List the active outlets six times over"})
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	eventually(t, 60*time.Second, "the third skill call", func() bool { return c.skills.Calls(demo.SkillOutletList) >= 3 })
	for _, p := range procs {
		p.Kill()
	}
	before := c.skills.Calls(demo.SkillOutletList)
	c.restartNATS() // the bus too: everything of the run is in its store
	t.Logf("killed every process and restarted NATS after %d skill calls", before)
	if before >= steps {
		t.Fatalf("the run was past its plan (%d calls) before the crash", before)
	}
	c.startAll(1)

	res, err := pending.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.TerminalCode != orch.CodeSuccess || len(res.Steps) != steps {
		t.Fatalf("after the restart the run ended %s with %d steps: %s", res.TerminalCode, len(res.Steps), res.Response)
	}
	inv := c.skills.Invocations()
	executed := 0
	for key, n := range inv {
		if n != 1 {
			t.Errorf("idempotency key %q executed %d times", key, n)
		}
		executed += n
	}
	if executed != steps {
		t.Errorf("%d skill executions for %d steps (by key %v)", executed, steps, inv)
	}
	assertReplays(t, ctx, js, 1)
	t.Logf("%d skill calls in all, %d answered from a first execution (%v)", c.skills.Calls(demo.SkillOutletList),
		len(c.skills.Replays()), c.skills.Replays())
}
