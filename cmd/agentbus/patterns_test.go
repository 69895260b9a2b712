package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/router"
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

// TestSupervisor_LaneThatNeverFinishesIsCutAtTheDeadline: one of two lanes
// hangs in its skill. The group's deadline, a JetStream scheduled message,
// reaches the aggregator after 2 s; it joins the group with the lane that
// finished, and the run answers PARTIAL_SUCCESS naming the missing lane.
// When the hung call finally gives up, its late result joins nothing: the
// run still has one run.finished.
func TestSupervisor_LaneThatNeverFinishesIsCutAtTheDeadline(t *testing.T) {
	goals := []llm.LaneGoal{
		{Goal: "List the active outlets", Skills: []string{demo.SkillOutletList}},
		{Goal: "List the inactive outlets", Skills: []string{demo.SkillOutletList}},
	}
	b, _ := json.Marshal(llm.SuperviseOutput{Lanes: goals})
	chat := llmtest.NewChatServer([]llmtest.Exchange{{Task: llm.TaskSupervise, Content: string(b), Times: -1}})
	t.Cleanup(chat.Close)
	c := newCluster(t, demo.Config{HangFirst: map[string]int{demo.SkillOutletList: 1}}, "MODEL_PLANNER=openai:test-model",
		"MODEL_BASE_URL="+chat.URL, "MODEL_API_KEY="+modelKey, "MODEL_MAX_RETRIES=1", "SKILL_TIMEOUT=6s")
	nc, js := connect(t, c.nats)
	patterns := slices.Clone(router.DefaultPatterns)
	for i := range patterns {
		patterns[i].GroupTimeoutS = 2
	}
	pb, _ := json.Marshal(patterns)
	presetConfig(t, js, router.ConfigKeyPatterns, pb)
	c.startAll(1)

	start := time.Now()
	res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-cut",
		Message: "Run a multi-dimensional risk analysis of the outlets across independent dimensions"})
	if res.TerminalCode != orch.CodePartialSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	if wall := time.Since(start); wall > 5*time.Second {
		t.Fatalf("the run took %s: the 2 s deadline did not cut the hung lane", wall)
	}
	var missing, complete []orch.Step
	for _, s := range res.Steps {
		switch s.Status {
		case orch.StepFailed:
			missing = append(missing, s)
		case orch.StepComplete:
			complete = append(complete, s)
		}
	}
	if len(missing) != 1 || len(complete) != 1 {
		t.Fatalf("steps %+v: want one lane cut, one complete", res.Steps)
	}
	note := fmt.Sprintf("step %d (%s)", missing[0].Index, missing[0].Task)
	if !strings.Contains(res.Response, note) || !strings.Contains(string(res.Detail), fmt.Sprintf(`"missing_steps":[%d]`, missing[0].Index)) {
		t.Fatalf("the answer does not name the missing lane %q:\n%s (detail %s; steps %+v)", note, res.Response, res.Detail, res.Steps)
	}
	// The hung call gives up at SKILL_TIMEOUT; its lane's late result must
	// not join the group again nor end the run a second time.
	eventually(t, 20*time.Second, "the hung lane's late step.finished", func() bool {
		return countSubject(t, js, "agent.step.finished.demo") == 2
	})
	// Whatever the late result causes is published before it is acked:
	// the aggregator's group.joined, then the router's run.finished.
	for _, role := range []string{handlers.RoleAggregator, handlers.RoleRouter} {
		cons, err := js.Consumer(context.Background(), events.StreamAgent, role)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the "+role+" to ack everything", func() bool {
			info, err := cons.Info(context.Background())
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0
		})
	}
	if n := countSubject(t, js, "agent.group.joined.demo"); n != 1 {
		t.Fatalf("%d group.joined, want the deadline's one", n)
	}
	if n := countSubject(t, js, "agent.run.finished.demo"); n != 1 {
		t.Fatalf("%d run.finished, want 1", n)
	}
	_ = nc
}

// countSubject counts the AGENT stream's messages on subject.
func countSubject(t *testing.T, js jetstream.JetStream, subject string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects[subject])
}

// TestRunDeadline_HungRunEndsTimeout: a run whose only step hangs in its
// skill is stopped at its 2 s wall-clock deadline, a scheduled message to
// the router: the hung call is abandoned and the run ends TIMEOUT, long
// before the skill's own timeout.
func TestRunDeadline_HungRunEndsTimeout(t *testing.T) {
	c := newCluster(t, demo.Config{HangFirst: map[string]int{demo.SkillOutletList: 1}}, "SKILL_TIMEOUT=30s")
	_, js := connect(t, c.nats)
	patterns := slices.Clone(router.DefaultPatterns)
	for i := range patterns {
		patterns[i].RunTimeoutS = 2
	}
	pb, _ := json.Marshal(patterns)
	presetConfig(t, js, router.ConfigKeyPatterns, pb)
	c.startAll(1)
	start := time.Now()
	res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-timeout",
		Message: "List the active outlets and rank them by engagement"})
	wall := time.Since(start)
	if res.TerminalCode != orch.CodeTimeout {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	if wall > 10*time.Second {
		t.Fatalf("the run took %s to time out: its 2 s deadline did not stop it", wall)
	}
	if n := countSubject(t, js, "agent.run.finished.demo"); n != 1 {
		t.Fatalf("%d run.finished, want 1", n)
	}
}
