package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// handoffArgs are handoff_to_agent arguments naming target.
func handoffArgs(target string) string {
	return fmt.Sprintf(`{"target_agent_id":%q,"reason":"needs %s","context":{"order":"ORD-12345"}}`, target, target)
}

// chainAgents stores standard agents named by ids, each handing off to
// the next (the last to none): definitions written straight to the
// store, as an edit after validation may leave them.
func chainAgents(t *testing.T, env *handlerstest.Env, ids ...string) {
	t.Helper()
	for i, id := range ids {
		handlerstest.PutAgent(t, env, id, func(s *agents.AgentSpec) {
			s.Name, s.SystemPrompt, s.MaxTurns = "Agent "+id, "You are "+id+".", 0
			s.SubAgents = nil
			if i+1 < len(ids) {
				s.SubAgents = []string{ids[i+1]}
			}
		})
	}
}

// handoffModel routes to ReACT; its loop turns call handoff_to_agent
// with each of targets in turn, then (if answer) outlet_list and answer.
func handoffModel(t *testing.T, answer bool, targets ...string) *llmtest.Scripted {
	t.Helper()
	m := routedTo("research", router.PatternReact)
	for i, target := range targets {
		m.On(llm.TaskAct, llmtest.ToolCall(fmt.Sprintf("h-%d", i), orch.ToolHandoffToAgent, handoffArgs(target)))
	}
	if answer {
		m.On(llm.TaskAct, llmtest.ToolCall("c-1", demo.SkillOutletList, `{"status":"active"}`), loopAnswer(t, "done"))
	}
	return m
}

func toolNames(req llm.Request) []string {
	var out []string
	for _, tl := range req.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// TestHandoff_ChainOfThreeSucceedsAndAFourthIsRefused: agents A → B → C
// → D hand the conversation on; D (depth 3) answers, the session records
// D, its parent and the depth, and a replay of the run reproduces its
// decisions. D handing off again (to E) is refused: the run ends
// PERMISSION_DENIED. So is a handoff back into the chain.
func TestHandoff_ChainOfThreeSucceedsAndAFourthIsRefused(t *testing.T) {
	wholeRun(t)
	t.Run("depth 3", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		chainAgents(t, env, "agent-a", "agent-b", "agent-c", "agent-d")
		model := handoffModel(t, true, "agent-b", "agent-c", "agent-d")
		f := patternFlow(t, env, model)
		res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-chain", "agent-a"))
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s (trace %v)", res.TerminalCode, res.Reason, traceNames(seen))
		}
		accepted := handlerstest.AuditPayloads(t, seen, "handoff.accepted")
		if len(accepted) != 3 {
			t.Fatalf("handoff.accepted %v", accepted)
		}
		for i, want := range []string{"agent-b", "agent-c", "agent-d"} {
			if a := accepted[i]; a["to_agent_id"] != want || a["depth"] != float64(i+1) || a["reason"] != "needs "+want {
				t.Fatalf("handoff %d: %v", i+1, a)
			}
		}
		acts := model.Requests(llm.TaskAct)
		if len(acts) != 5 {
			t.Fatalf("%d act requests, want 5", len(acts))
		}
		// A offers both handoff tools; D, at depth 3, only the human one,
		// and is told who handed it the conversation and with what.
		if got := toolNames(acts[0]); !slices.Contains(got, orch.ToolHandoffToAgent) || !slices.Contains(got, orch.ToolHandoffToHuman) {
			t.Fatalf("A's tools %v", got)
		}
		last := acts[3]
		if got := toolNames(last); slices.Contains(got, orch.ToolHandoffToAgent) || !slices.Contains(got, orch.ToolHandoffToHuman) {
			t.Fatalf("D's tools %v", got)
		}
		if len(last.Messages) == 0 || !strings.Contains(last.Messages[0].Content, "agent-c handed this conversation to you: needs agent-d") ||
			!strings.Contains(last.Messages[0].Content, "ORD-12345") {
			t.Fatalf("D's first message %+v", last.Messages)
		}
		sess, _, err := (&runctl.Sessions{KV: env.Sessions}).Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
		if err != nil || sess.AgentID != "agent-d" || sess.ParentAgentID != "agent-c" || sess.HandoffDepth != 3 ||
			sess.HandoffReason != "needs agent-d" || sess.TurnCount != 1 || sess.State != orch.SessionActive {
			t.Fatalf("session %+v, %v", sess, err)
		}
		rep := runctl.ReplayRun("run-chain", seen, runctl.ReplayControls{})
		if rep.Decisions < 4 || len(rep.Divergences) != 0 || rep.Code != orch.CodeSuccess {
			t.Fatalf("replay %+v", rep)
		}
	})
	t.Run("depth 4 refused", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		chainAgents(t, env, "agent-a", "agent-b", "agent-c", "agent-d", "agent-e")
		f := patternFlow(t, env, handoffModel(t, false, "agent-b", "agent-c", "agent-d", "agent-e"))
		res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-chain4", "agent-a"))
		if res.TerminalCode != orch.CodePermissionDenied || !strings.Contains(res.Reason, "depth 4") {
			t.Fatalf("run ended %s: %q", res.TerminalCode, res.Reason)
		}
		if refused := handlerstest.AuditPayloads(t, seen, "handoff.refused"); len(refused) != 1 || refused[0]["to_agent_id"] != "agent-e" {
			t.Fatalf("handoff.refused %v", refused)
		}
		if rep := runctl.ReplayRun("run-chain4", seen, runctl.ReplayControls{}); len(rep.Divergences) != 0 || rep.Code != orch.CodePermissionDenied {
			t.Fatalf("replay %+v", rep)
		}
	})
	t.Run("cycle refused", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		for id, sub := range map[string]string{"agent-a": "agent-b", "agent-b": "agent-a"} {
			handlerstest.PutAgent(t, env, id, func(s *agents.AgentSpec) { s.SubAgents, s.MaxTurns = []string{sub}, 0 })
		}
		f := patternFlow(t, env, handoffModel(t, false, "agent-b", "agent-a"))
		res, _ := f.drive(t, handlerstest.AgentRunRequested(t, "run-cycle", "agent-a"))
		if res.TerminalCode != orch.CodePermissionDenied || !strings.Contains(res.Reason, "already in the handoff chain") {
			t.Fatalf("run ended %s: %q", res.TerminalCode, res.Reason)
		}
	})
}

// humanHandoffRun runs agent-a until it hands the session to a human.
func humanHandoffRun(t *testing.T, env *handlerstest.Env, f *flow, runID string) (orch.RunParked, pumped) {
	t.Helper()
	p := f.pump(t, handlerstest.AgentRunRequested(t, runID, "agent-a"))
	if len(p.finished) != 0 || len(p.parked) != 1 {
		t.Fatalf("want the run parked: finished %+v, parked %+v; trace %v", p.finished, p.parked, traceNames(p.seen))
	}
	return p.parked[0], p
}

// TestHandoff_HumanParksAndResumesOnReply: an agent's handoff_to_human
// parks the run and hands the session off with its packet (visible via
// GET /agent/sessions/{id}, session.handoff.human in the trace); a reply
// through POST /agent/sessions/{id}/reply resumes it: the run answers
// with the reply, the session is active again with the reply in its
// history. Another tenant's session is 404; a reply to a session that is
// not handed off is 409 session_not_handed_off.
func TestHandoff_HumanParksAndResumesOnReply(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	handlerstest.PutAgent(t, env, "agent-a", func(s *agents.AgentSpec) { s.MaxTurns = 0 })
	model := routedTo("research", router.PatternReact)
	model.On(llm.TaskAct, llmtest.ToolCall("h-1", orch.ToolHandoffToHuman, `{"reason":"the customer asks for a person","priority":"high"}`))
	f := patternFlow(t, env, model)
	parked, p := humanHandoffRun(t, env, f, "run-human")
	if h := parked.Gate.Handoff; parked.Gate.Kind != orch.GateHuman || h == nil || h.Priority != "high" ||
		!slices.Equal(h.Agents, []string{"agent-a"}) || !strings.Contains(h.Summary, handlerstest.RankTask) {
		t.Fatalf("parked %+v", parked)
	}
	if ev := handlerstest.AuditPayloads(t, p.seen, "session.handoff.human"); len(ev) != 1 || ev[0]["priority"] != "high" ||
		ev[0]["session_id"] != handlerstest.Session || ev[0]["reason"] != "the customer asks for a person" {
		t.Fatalf("session.handoff.human %v", ev)
	}
	// The projector indexed the handed-off session into agent_sessions.
	if doc, err := env.Store.GetSession(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session); err != nil || doc.State != orch.SessionHandedOff ||
		doc.Handoff == nil || doc.Handoff.GateID != parked.Gate.Gate {
		t.Fatalf("agent_sessions document %+v, %v", doc, err)
	}
	sessions := &runctl.Sessions{KV: env.Sessions}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Sessions: sessions, Gates: env.Gates, Cancels: runctl.NewCancels(env.Cancels)})
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions/" + handlerstest.Session, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
	h, _ := body["handoff"].(map[string]any)
	if body["state"] != orch.SessionHandedOff || h == nil || h["run_id"] != "run-human" || h["gate_id"] != parked.Gate.Gate ||
		h["priority"] != "high" || body["agent_id"] != "agent-a" {
		t.Fatalf("session %v", body)
	}
	// An approval without a reply cannot answer the run for the human.
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/runs/run-human/approvals/" + parked.Gate.Gate,
		Body: `{"decision":"approve"}`, Headers: map[string]string{"X-Tenant-Id": handlerstest.Tenant, "X-User-Id": "lead"},
		WantStatus: 400, WantCode: "invalid_answer"})
	reply := `{"message":"I have refunded your order.","by":"operator-jo"}`
	path := "/agent/sessions/" + handlerstest.Session + "/reply"
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Body: reply, Headers: handlerstest.AsTenant("other-tenant"), WantStatus: 404, WantCode: "not_found"})
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Body: `{"message":" ","by":"x"}`, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 400, WantCode: "invalid_request"})
	got := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Body: reply, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 202})
	if got["run_id"] != "run-human" || got["status"] != "resuming" || got["by"] != "operator-jo" {
		t.Fatalf("reply answer %v", got)
	}
	// The ingress published the resolution; the router takes it on.
	stream, err := env.JS.Stream(handlerstest.Ctx(t), events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(handlerstest.Ctx(t), "agent.approval.decided."+handlerstest.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	decided, err := events.FromMsg(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	done := f.pump(t, decided)
	if len(done.finished) != 1 || done.finished[0].TerminalCode != orch.CodeSuccess || done.finished[0].Response != "I have refunded your order." {
		t.Fatalf("after the reply: %+v (trace %v)", done.finished, traceNames(done.seen))
	}
	sess, _, err := sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.State != orch.SessionActive || sess.Handoff != nil || len(sess.Messages) < 2 ||
		sess.Messages[len(sess.Messages)-1].Content != "I have refunded your order." || sess.TurnCount != 0 {
		t.Fatalf("session after the reply %+v, %v", sess, err)
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Body: reply, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 409, WantCode: "session_not_handed_off"})
	if rep := runctl.ReplayRun("run-human", append(p.seen, append(done.seen, decided)...), gatesOf(t, env, "run-human")); rep.Decisions == 0 ||
		len(rep.Divergences) != 0 {
		t.Fatalf("replay %+v", rep)
	}
}

// TestHandoff_SessionTurnLimit: an agent with max_turns 1 answers the
// session's first run; the second takes its handoff_behavior: end ends it
// BUDGET_EXHAUSTED and completes the session, escalate hands the session
// to a human without a model call.
func TestHandoff_SessionTurnLimit(t *testing.T) {
	wholeRun(t)
	for _, behavior := range []string{orch.HandoffEnd, orch.HandoffEscalate} {
		t.Run(behavior, func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			handlerstest.PutAgent(t, env, "agent-a", func(s *agents.AgentSpec) { s.MaxTurns, s.HandoffBehavior = 1, behavior })
			model := loopCalling(t, `{"status":"active"}`)
			f := patternFlow(t, env, model)
			if res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-turn-1", "agent-a")); res.TerminalCode != orch.CodeSuccess {
				t.Fatalf("first run %s: %s (%v)", res.TerminalCode, res.Reason, traceNames(seen))
			}
			calls := len(model.Requests())
			sessions := &runctl.Sessions{KV: env.Sessions}
			var p pumped
			if behavior == orch.HandoffEnd {
				res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-turn-2", "agent-a"))
				if res.TerminalCode != orch.CodeBudgetExhausted || !strings.Contains(res.Reason, "limit of 1 turns") {
					t.Fatalf("second run %s: %q", res.TerminalCode, res.Reason)
				}
				p.seen = seen
			} else {
				parked, pp := humanHandoffRun(t, env, f, "run-turn-2")
				if parked.Gate.Handoff == nil || parked.Gate.Handoff.Trigger != "max_turns" {
					t.Fatalf("parked %+v", parked)
				}
				p = pp
			}
			if n := len(model.Requests()); n != calls {
				t.Fatalf("the run past the limit made %d model calls", n-calls)
			}
			if tl := handlerstest.AuditPayloads(t, p.seen, "session.turn_limit"); len(tl) != 1 || tl[0]["max_turns"] != float64(1) {
				t.Fatalf("session.turn_limit %v", tl)
			}
			sess, _, err := sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
			want := map[string]string{orch.HandoffEnd: orch.SessionCompleted, orch.HandoffEscalate: orch.SessionHandedOff}[behavior]
			if err != nil || sess.State != want || sess.TurnCount != 1 {
				t.Fatalf("session %+v, %v", sess, err)
			}
			if behavior == orch.HandoffEnd && sess.EndedAt.IsZero() {
				t.Fatal("a completed session has no ended_at")
			}
		})
	}
}
