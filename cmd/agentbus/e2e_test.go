package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

func startStack(t *testing.T) *app.Stack {
	s, _ := startStackWith(t, demo.Config{})
	return s
}

// networkOutlets makes the demo's outlet_list reach the open world: a
// network call, which waits at a gate by default.
var networkOutlets = demo.Config{Hints: map[string]*skills.Annotations{
	demo.SkillOutletList: {ReadOnlyHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(true)}}}

// TestCoreFlow_ManagerDelegatesAndSynthesisesEndToEnd posts the demo task to the ingress of an
// in-process agentbus (embedded NATS, every role, the demo Skill Service)
// and checks the answer, the plan's steps, the memory written and the trace.
func TestCoreFlow_ManagerDelegatesAndSynthesisesEndToEnd(t *testing.T) {
	s := startStack(t)
	res := postRun(t, "http://"+s.IngressAddr, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-e2e",
		Message: "List the active outlets and rank them by engagement"})
	if res.TerminalCode != orch.CodeSuccess || res.Status != orch.PlanComplete {
		t.Fatalf("run ended %s/%s: %s", res.Status, res.TerminalCode, res.Response)
	}
	assertRanked(t, res.Response, expectedRanking(t, s.SkillsURL, "demo"))

	ctx := context.Background()
	plan, version := finalPlan(t, s, res.TenantID, res.PlanID)
	if plan.Status != store.PlanStatusComplete || len(plan.Steps) != 2 || version < 4 {
		t.Fatalf("plan %s v%d with %d steps", plan.Status, version, len(plan.Steps))
	}
	wantSkills := []string{"outlet_list", "engagement_analytics"}
	for i, st := range plan.Steps {
		if st.Skills[0] != wantSkills[i] || st.Status != store.StepStatusComplete || !st.Validated {
			t.Fatalf("step %d = %+v", i+1, st)
		}
		wantPrefix := "demo:sess-e2e:" + st.TaskID + ":"
		if !strings.HasPrefix(st.MemoryKey, wantPrefix) {
			t.Fatalf("step %d memory key %q is not namespaced as %q<label>", i+1, st.MemoryKey, wantPrefix)
		}
		m, err := s.Deps.Store.GetMemory(ctx, st.MemoryKey)
		if err != nil || !json.Valid([]byte(m.Text)) {
			t.Fatalf("memory %s: %v", st.MemoryKey, err)
		}
	}
	if !strings.HasSuffix(plan.Steps[0].MemoryKey, ":outlet_ids") || !strings.HasSuffix(plan.Steps[1].MemoryKey, ":results") {
		t.Fatalf("memory labels: %s, %s", plan.Steps[0].MemoryKey, plan.Steps[1].MemoryKey)
	}
	// The all-in-one's roles talk to its embedded server in memory, not
	// over a loopback socket: the server lists their connection without a
	// address.
	connz, err := s.Server.Connz(&server.ConnzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var roles []*server.ConnInfo
	for _, c := range connz.Conns {
		if c.Name == "agentbus-agentbus" {
			roles = append(roles, c)
		}
	}
	if len(roles) != 1 || roles[0].IP != "" || roles[0].Port != 0 {
		t.Fatalf("the roles' connections: %+v", roles)
	}
	// The projector indexes a hop's audit events concurrently: wait for
	// every one the run must have left, not just for the last.
	want := []string{"user_message.received", "routing.decided", "plan.received", "step_1.started",
		"skill.called", "memory.written", "step_1.complete", "step_2.complete", "run.finished"}
	var types []string
	eventually(t, 10*time.Second, fmt.Sprintf("the trace to hold %v", want), func() bool {
		evs, err := s.Deps.Store.Trace(ctx, store.TraceQuery{TenantID: "demo", SessionID: "sess-e2e"})
		if err != nil {
			return false
		}
		types = types[:0]
		for _, e := range evs {
			types = append(types, e.EventType)
		}
		for _, w := range want {
			if !containsStr(types, w) {
				return false
			}
		}
		return true
	})
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestPoisonEventIsDeadLettered publishes bytes that are no CloudEvent,
// and a well-formed request with no run id: both land on agent.dead.<tenant>
// with their reason. A request with a run id but an empty message is no
// poison: its run ends VALIDATION_FAIL at once, with no dead letter. The
// router keeps serving.
func TestPoisonEventIsDeadLettered(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	js := s.Deps.JS
	if _, err := js.Publish(ctx, "agent.run.requested.acme", []byte("{not a cloud event")); err != nil {
		t.Fatal(err)
	}
	dl := waitDeadLetter(t, js, "agent.dead.acme", 1)
	if !strings.Contains(dl[0].Reason, "decode") || string(dl[0].Original) != "{not a cloud event" || dl[0].Subject != "agent.run.requested.acme" {
		t.Fatalf("dead letter = %+v", dl[0])
	}
	noRun, _ := events.New("no-run", events.TypeRunRequested, events.Meta{Tenant: "acme", Session: "s1"},
		orch.RunRequest{TenantID: "acme", UserID: "u", SessionID: "s1", Message: "hello"})
	if err := events.Publish(ctx, js, noRun); err != nil {
		t.Fatal(err)
	}
	dl = waitDeadLetter(t, js, "agent.dead.acme", 2)
	if !strings.Contains(dl[1].Reason, "run_id") || dl[1].Deliveries != 1 {
		t.Fatalf("dead letter = %+v, want the missing run_id named on the first delivery", dl[1])
	}

	finished := make(chan orch.RunResult, 1)
	sub, err := s.Deps.NC.Subscribe("agent.run.finished.acme", func(m *nats.Msg) {
		ev, err := events.FromMsg(m.Header, m.Data)
		var r orch.RunResult
		if err == nil && events.Decode(ev, &r) == nil && r.RunID == "run-bad" {
			finished <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	bad, _ := events.New("run-bad", events.TypeRunRequested, events.Meta{Tenant: "acme", Session: "s1", Run: "run-bad"},
		orch.RunRequest{RunID: "run-bad", TenantID: "acme", UserID: "u", SessionID: "s1", Message: "   "})
	if err := events.Publish(ctx, js, bad); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-finished:
		if r.TerminalCode != orch.CodeValidationFail || !strings.Contains(r.Reason, "message is empty") {
			t.Fatalf("invalid run ended with %s (%s)", r.TerminalCode, r.Reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the invalid run was never finished")
	}
	if n := len(readAll[events.DeadLetter](t, js, "agent.dead.acme")); n != 2 {
		t.Errorf("%d dead letters, want 2: an invalid request with a run id ends its run instead", n)
	}
	res := postRun(t, "http://"+s.IngressAddr, orch.RunRequest{TenantID: "acme", UserID: "u", SessionID: "s2",
		Message: "List the active outlets and rank them by engagement"})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("router stopped serving after poison: %+v", res)
	}
}

// waitDeadLetter waits until subject holds n dead letters and returns them.
func waitDeadLetter(t *testing.T, js jetstream.JetStream, subject string, n int) []events.DeadLetter {
	t.Helper()
	var out []events.DeadLetter
	eventually(t, 10*time.Second, fmt.Sprintf("%d dead letters on %s", n, subject), func() bool {
		out = readAll[events.DeadLetter](t, js, subject)
		return len(out) >= n
	})
	return out
}

// readAll decodes every message stored on subject in the AGENT stream.
func readAll[T any](t *testing.T, js jetstream.JetStream, subject string) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, events.StreamAgent, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) || err != nil {
			return out
		}
		ev, err := events.FromMsg(msg.Headers(), msg.Data())
		if err != nil {
			t.Fatalf("stored message on %s does not decode: %v", subject, err)
		}
		var v T
		if err := events.Decode(ev, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
}

// TestDuplicateStepFinishedCountsOnce delivers the same step.finished twice
// (bypassing the duplicate window with distinct Nats-Msg-Ids) to the
// running aggregator: the fanin entry counts it once and the two-member
// group joins only when the second member arrives, exactly once.
func TestDuplicateStepFinishedCountsOnce(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	js := s.Deps.JS
	group := orch.Group{ID: "grp-dup-test", Expected: 2}
	run := orch.RunState{Request: orch.RunRequest{RunID: "run-dup", TenantID: "dup", SessionID: "s", UserID: "u", Message: "x"},
		Plan: orch.Plan{PlanID: "plan-dup", Status: orch.PlanExecuting, Steps: []orch.Step{
			{Index: 1, Task: "a", Status: orch.StepRunning}, {Index: 2, Task: "b", Status: orch.StepRunning}}}, Seq: 2}
	publishRaw := func(step int, msgID string) {
		ev, err := events.New(fmt.Sprintf("finished-%d", step), events.TypeStepFinished, events.Meta{Tenant: "dup", Run: "run-dup"},
			orch.StepFinished{Run: run, Group: group, Result: orch.StepResult{Step: step, Outcome: orch.OutcomeComplete}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := events.ToMsg(ev)
		if err != nil {
			t.Fatal(err)
		}
		m.Header.Set(nats.MsgIdHdr, msgID)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	fanin, err := js.KeyValue(ctx, handlers.BucketFanin)
	if err != nil {
		t.Fatal(err)
	}
	members := func() int {
		e, err := fanin.Get(ctx, "grp."+group.ID)
		if err != nil {
			return 0
		}
		var st struct {
			Results map[string]json.RawMessage `json:"results"`
		}
		_ = json.Unmarshal(e.Value(), &st)
		return len(st.Results)
	}
	joins := func() int {
		return len(readAll[orch.GroupJoined](t, js, "agent.group.joined.dup"))
	}
	publishRaw(1, "copy-a")
	publishRaw(1, "copy-b")
	cons, _ := js.Consumer(ctx, events.StreamAgent, handlers.RoleAggregator)
	eventually(t, 10*time.Second, "both copies to be acked and the member recorded", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && members() > 0
	})
	if n := members(); n != 1 {
		t.Fatalf("fanin counts %d members after a duplicate, want 1", n)
	}
	if n := joins(); n != 0 {
		t.Fatalf("group joined with one of two members (%d joins)", n)
	}
	publishRaw(2, "copy-c")
	eventually(t, 10*time.Second, "the group to join", func() bool { return joins() == 1 })
	if n := members(); n != 2 {
		t.Fatalf("fanin counts %d members, want 2", n)
	}
}
