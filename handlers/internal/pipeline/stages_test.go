package pipeline

import (
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// supportStages are a three-stage Handoffs agent's steps: triage moves
// to billing, billing to refund (or back), refund escalates to a human.
func supportStages() []agents.Step {
	return []agents.Step{
		{StepID: "triage", Name: "Triage", SystemPrompt: "Identify the customer's issue.", IsInitial: true,
			Tools: []string{demo.SkillOutletList}, TransitionTools: []string{"transition_to_billing"}},
		{StepID: "billing", Name: "Billing", SystemPrompt: "Help with billing questions.",
			Tools: []string{demo.SkillMenuCatalog}, TransitionTools: []string{"transition_to_refund", "transition_to_triage"}},
		{StepID: "refund", Name: "Refund", SystemPrompt: "Process the refund.", IsFinal: true,
			Tools: []string{demo.SkillEngagementAnalytics}, TransitionTools: []string{orch.ToolEscalateToHuman}},
	}
}

// agentRun is a run.requested of message by agent agentID in session.
func agentRun(t *testing.T, runID, agentID, session, message string) event.Event {
	t.Helper()
	req := handlerstest.RunRequest(runID, message)
	req.AgentID, req.SessionID = agentID, session
	return handlerstest.NewEvent(t, runID, events.TypeRunRequested, req)
}

// TestStages_ThreeStagesMoveByTheirTransitionTools: a three-stage
// Handoffs agent (triage, billing, refund) moves through its stages as
// its model calls their transition tools, each stage offering only its
// own tools and transition tools; the session keeps the stage, so the
// next message continues in refund, where a triage tool is denied. A
// replay re-derives the run.
func TestStages_ThreeStagesMoveByTheirTransitionTools(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	handlerstest.PutAgent(t, env, "agent-support", func(s *agents.AgentSpec) {
		s.Tools = []string{demo.SkillOutletList, demo.SkillEngagementAnalytics, demo.SkillMenuCatalog}
		s.Steps, s.MaxTurns, s.Limits = supportStages(), 0, nil
	})
	model := routedTo("research", router.PatternReact)
	model.On(llm.TaskAct,
		llmtest.ToolCall("t-1", demo.SkillOutletList, `{"status":"active"}`),
		llmtest.ToolCall("t-2", "transition_to_billing", `{"reason":"a billing question"}`),
		llmtest.ToolCall("t-3", "transition_to_refund", `{"reason":"wants a refund"}`),
		llmtest.ToolCall("t-4", demo.SkillEngagementAnalytics, `{"outlet_ids":["out-001"]}`),
		loopAnswer(t, "refund started"),
		// The session's next run, in refund: a triage tool is refused.
		llmtest.ToolCall("t-5", demo.SkillOutletList, `{"status":"active"}`),
		llmtest.ToolCall("t-6", demo.SkillEngagementAnalytics, `{"outlet_ids":["out-001"]}`),
		loopAnswer(t, "still refunding"))
	model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, agentRun(t, "run-stage-1", "agent-support", handlerstest.Session, "I was charged twice, refund me"))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s (trace %v)", res.TerminalCode, res.Reason, traceNames(seen))
	}
	moved := handlerstest.AuditPayloads(t, seen, "stage.transitioned")
	if len(moved) != 2 || moved[0]["from"] != "triage" || moved[0]["to"] != "billing" || moved[1]["from"] != "billing" ||
		moved[1]["to"] != "refund" || moved[1]["tool"] != "transition_to_refund" {
		t.Fatalf("stage.transitioned %v", moved)
	}
	acts := model.Requests(llm.TaskAct)
	want := [][]string{
		{demo.SkillOutletList, "transition_to_billing"},
		{demo.SkillOutletList, "transition_to_billing"},
		{demo.SkillMenuCatalog, "transition_to_refund", "transition_to_triage"},
		{demo.SkillEngagementAnalytics, orch.ToolEscalateToHuman},
		{demo.SkillEngagementAnalytics, orch.ToolEscalateToHuman},
	}
	if len(acts) != len(want) {
		t.Fatalf("%d act requests, want %d", len(acts), len(want))
	}
	prompts := []string{"Identify the customer's issue.", "Identify the customer's issue.", "Help with billing questions.",
		"Process the refund.", "Process the refund."}
	for i, w := range want {
		got := toolNames(acts[i])
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("turn %d offered %v, want only %v", i+1, got, w)
		}
		if !slices.ContainsFunc(acts[i].Messages, func(m llm.Message) bool { return strings.Contains(m.Content, prompts[i]) }) {
			t.Errorf("turn %d does not see its stage's prompt %q", i+1, prompts[i])
		}
	}
	sessions := &runctl.Sessions{KV: env.Sessions}
	sess, _, err := sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.Stage != "refund" || sess.AgentID != "agent-support" {
		t.Fatalf("session %+v, %v", sess, err)
	}
	if rep := runctl.ReplayRun("run-stage-1", seen, runctl.ReplayControls{}); len(rep.Divergences) != 0 || rep.Code != orch.CodeSuccess {
		t.Fatalf("replay %+v", rep)
	}

	res, seen = f.drive(t, agentRun(t, "run-stage-2", "agent-support", handlerstest.Session, "any news?"))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("second run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if r := handlerstest.AuditPayloads(t, seen, "stage.resumed"); len(r) != 1 || r[0]["stage"] != "refund" {
		t.Fatalf("stage.resumed %v", r)
	}
	acts = model.Requests(llm.TaskAct)
	if got := toolNames(acts[5]); slices.Contains(got, demo.SkillOutletList) || !slices.Contains(got, demo.SkillEngagementAnalytics) {
		t.Fatalf("the resumed refund stage offered %v", got)
	}
	if denied := handlerstest.AuditPayloads(t, seen, "skill.denied"); len(denied) != 1 {
		t.Fatalf("skill.denied %v: a triage tool in the refund stage must be refused", denied)
	}
}

// TestRouterAgent_HandsEachMessageToTheRightSubAgent: a router agent
// with three sub-agents classifies each of three messages of one session
// with one model call (the offline model, by their descriptions) and the
// run goes on as the chosen sub-agent, whose tools it then has; the
// session stays the router's, so each message is classified again. The
// trace records agent.routed with the options, and a replay re-derives
// each run.
func TestRouterAgent_HandsEachMessageToTheRightSubAgent(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	subs := map[string]string{
		"agent-billing":  "Billing: invoices, charges, payments and refunds",
		"agent-outlets":  "Outlets: store locations, opening hours and addresses",
		"agent-shipping": "Shipping: delivery, parcels, tracking and couriers",
	}
	for id, desc := range subs {
		handlerstest.PutAgent(t, env, id, func(s *agents.AgentSpec) {
			s.Name, s.Description, s.SystemPrompt, s.MaxTurns = strings.SplitN(desc, ":", 2)[0], desc, "You are "+id+".", 0
			s.Tools = []string{demo.SkillOutletList}
		})
	}
	handlerstest.PutAgent(t, env, "agent-front", func(s *agents.AgentSpec) {
		s.Type, s.SubAgents, s.MaxTurns = agents.TypeRouter, []string{"agent-billing", "agent-outlets", "agent-shipping"}, 0
		s.Tools = nil
	})
	model := routedTo("research", router.PatternReact)
	model.On(llm.TaskRoute, routeTo("research", router.PatternReact), routeTo("research", router.PatternReact))
	for range 3 {
		model.On(llm.TaskAct, llmtest.ToolCall("c", demo.SkillOutletList, `{"status":"active"}`), loopAnswer(t, "done"))
	}
	f := patternFlow(t, env, model)
	for i, c := range []struct{ message, want string }{
		{"I was charged twice on my invoice, refund the payment", "agent-billing"},
		{"Where is my parcel? The courier tracking shows no delivery", "agent-shipping"},
		{"What are the opening hours of the store locations near me?", "agent-outlets"},
	} {
		runID := "run-front-" + string(rune('1'+i))
		res, seen := f.drive(t, agentRun(t, runID, "agent-front", handlerstest.Session, c.message))
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("%q ended %s: %s (trace %v)", c.message, res.TerminalCode, res.Reason, traceNames(seen))
		}
		routed := handlerstest.AuditPayloads(t, seen, "agent.routed")
		if len(routed) != 1 || routed[0]["agent_id"] != c.want || routed[0]["router_agent_id"] != "agent-front" ||
			len(routed[0]["options"].([]any)) != 3 {
			t.Fatalf("%q: agent.routed %v, want %s", c.message, routed, c.want)
		}
		classified := 0
		for _, p := range handlerstest.AuditPayloads(t, seen, "model.called") {
			if p["task"] == string(llm.TaskClassify) {
				classified++
			}
		}
		if classified != 1 {
			t.Fatalf("%q: %d classify calls, want 1", c.message, classified)
		}
		acts := model.Requests(llm.TaskAct)
		if last := acts[len(acts)-1]; !slices.ContainsFunc(last.Messages, func(m llm.Message) bool {
			return strings.Contains(m.Content, "You are agent "+c.want)
		}) {
			t.Errorf("%q: the sub-agent's turn is not told it is %s: %+v", c.message, c.want, last.Messages)
		}
		if rep := runctl.ReplayRun(runID, seen, runctl.ReplayControls{}); len(rep.Divergences) != 0 || rep.Code != orch.CodeSuccess {
			t.Fatalf("replay %+v", rep)
		}
	}
	sess, _, err := (&runctl.Sessions{KV: env.Sessions}).Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.AgentID != "agent-front" || len(sess.HandoffChain) != 0 || sess.TurnCount != 3 {
		t.Fatalf("session %+v, %v", sess, err)
	}
}
