package pipeline

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

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
	"github.com/agentbus/agentbus/store"
)

// selectedAgents are the agent ids of a trace's agent.selected events.
func selectedAgents(t *testing.T, seen []event.Event) []string {
	t.Helper()
	var out []string
	for _, p := range handlerstest.AuditPayloads(t, seen, "agent.selected") {
		id, _ := p["agent_id"].(string)
		out = append(out, id)
	}
	return out
}

// detailCode is the detail.code of a run result.
func detailCode(t *testing.T, res orch.RunResult) string {
	t.Helper()
	var d struct {
		Code string `json:"code"`
	}
	if len(res.Detail) > 0 {
		if err := json.Unmarshal(res.Detail, &d); err != nil {
			t.Fatalf("detail %s: %v", res.Detail, err)
		}
	}
	return d.Code
}

// lastAudit is the last audit event name the ingress published for the
// test tenant, read back from the AGENT stream (each a trail of its own).
func lastAudit(t *testing.T, env *handlerstest.Env, name string) event.Event {
	t.Helper()
	cons, err := env.JS.OrderedConsumer(handlerstest.Ctx(t), events.StreamAgent, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.TrailSubject(handlerstest.Tenant)}})
	if err != nil {
		t.Fatal(err)
	}
	var last *event.Event
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			break
		}
		evs, err := events.FromMsgs(m.Headers(), m.Data())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type() == events.AuditType(name) {
				last = &ev
			}
		}
	}
	if last == nil {
		t.Fatalf("no %s published", name)
	}
	return *last
}

// TestSessions_NextRunContinuesWithTheCurrentAgent: a session whose first
// run was handed A → B → C continues as C in its next run, whether that
// run names A (the original agent) or no agent, with the chain: one more
// handoff (to D) reaches depth 3 and the next (to E) is refused, so the
// depth limit holds across the session's runs. A run naming an agent
// outside the session's is refused: 409 session_agent_mismatch at the
// ingress, VALIDATION_FAIL (detail.code) from NATS, without a model call.
func TestSessions_NextRunContinuesWithTheCurrentAgent(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	chainAgents(t, env, "agent-a", "agent-b", "agent-c", "agent-d", "agent-e")
	handlerstest.PutAgent(t, env, "agent-x", func(s *agents.AgentSpec) { s.MaxTurns = 0 })
	model := routedTo("research", router.PatternReact)
	model.On(llm.TaskRoute, routeTo("research", router.PatternReact), routeTo("research", router.PatternReact))
	model.On(llm.TaskAct,
		// run 1: A → B → C, C answers.
		llmtest.ToolCall("h-1", orch.ToolHandoffToAgent, handoffArgs("agent-b")),
		llmtest.ToolCall("h-2", orch.ToolHandoffToAgent, handoffArgs("agent-c")),
		llmtest.ToolCall("c-1", demo.SkillOutletList, `{"status":"active"}`), loopAnswer(t, "done by C"),
		// run 2 (names A): C answers.
		llmtest.ToolCall("c-2", demo.SkillOutletList, `{"status":"active"}`), loopAnswer(t, "C again"),
		// run 3 (names none): C → D (depth 3), D → E refused.
		llmtest.ToolCall("h-3", orch.ToolHandoffToAgent, handoffArgs("agent-d")),
		llmtest.ToolCall("h-4", orch.ToolHandoffToAgent, handoffArgs("agent-e")))
	f := patternFlow(t, env, model)
	sessions := &runctl.Sessions{KV: env.Sessions}

	if res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-s1", "agent-a")); res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run 1 ended %s: %s (%v)", res.TerminalCode, res.Reason, traceNames(seen))
	}
	sess, _, err := sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.AgentID != "agent-c" || !slices.Equal(sess.HandoffChain, []string{"agent-a", "agent-b", "agent-c"}) ||
		sess.HandoffDepth != 2 {
		t.Fatalf("session after run 1: %+v, %v", sess, err)
	}

	res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-s2", "agent-a"))
	if res.TerminalCode != orch.CodeSuccess || res.Response == "" {
		t.Fatalf("run 2 ended %s: %s (%v)", res.TerminalCode, res.Reason, traceNames(seen))
	}
	if got := selectedAgents(t, seen); !slices.Equal(got, []string{"agent-c"}) {
		t.Fatalf("run 2 acted as %v; want agent-c, the session's current agent", got)
	}
	if c := handlerstest.AuditPayloads(t, seen, "session.continued"); len(c) != 1 || c[0]["handoff_depth"] != float64(2) ||
		c[0]["requested_agent_id"] != "agent-a" {
		t.Fatalf("session.continued %v", c)
	}
	// Its model is told it is agent-c, handed the conversation by B.
	acts := model.Requests(llm.TaskAct)
	if m := acts[len(acts)-1].Messages; len(m) == 0 || !strings.Contains(m[0].Content, "You are agent agent-c. Agent agent-b handed") {
		t.Fatalf("run 2's first message %+v", m)
	}

	none := handlerstest.RunRequest("run-s3", handlerstest.RankTask)
	res, seen = f.drive(t, handlerstest.NewEvent(t, "run-s3", events.TypeRunRequested, none))
	if res.TerminalCode != orch.CodePermissionDenied || !strings.Contains(res.Reason, "depth 4") {
		t.Fatalf("run 3 ended %s: %q; want the handoff to E refused at depth 4 (%v)", res.TerminalCode, res.Reason, traceNames(seen))
	}
	if acc := handlerstest.AuditPayloads(t, seen, "handoff.accepted"); len(acc) != 1 || acc[0]["to_agent_id"] != "agent-d" || acc[0]["depth"] != float64(3) {
		t.Fatalf("run 3 handoff.accepted %v; want C → D at depth 3", acc)
	}
	sess, _, err = sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.AgentID != "agent-d" || sess.HandoffDepth != 3 || len(sess.HandoffChain) != 4 {
		t.Fatalf("session after run 3: %+v, %v", sess, err)
	}

	// Another agent than the session's: refused at the ingress and, when
	// the request comes straight from NATS, by the router.
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Sessions: sessions, RunTimeout: time.Second})
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/run", Headers: handlerstest.AsTenant(handlerstest.Tenant),
		Body:       `{"user_id":"user-1","session_id":"` + handlerstest.Session + `","message":"hi","agent_id":"agent-x"}`,
		WantStatus: http.StatusConflict, WantCode: orch.SessionRefusedAgent})
	calls := len(model.Requests())
	res, _ = f.drive(t, handlerstest.AgentRunRequested(t, "run-s4", "agent-x"))
	if res.TerminalCode != orch.CodeValidationFail || detailCode(t, res) != orch.SessionRefusedAgent || len(model.Requests()) != calls {
		t.Fatalf("run naming agent-x ended %s (%s) after %d model calls", res.TerminalCode, res.Detail, len(model.Requests())-calls)
	}
	if after, _, _ := sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session); after.AgentID != "agent-d" || len(after.Messages) != len(sess.Messages) {
		t.Fatalf("the refused run changed the session: %+v", after)
	}
}

// TestSessions_HandedOffSessionIsTheHumans: while a session is handed off
// to a human, POST /agent/run and a triggered POST /agent/events for it
// are 409 session_handed_off, and a run.requested straight from NATS ends
// REVIEW_REQUIRED (detail.code session_handed_off) without a model call,
// leaving the handoff open. A completed session (max_turns, end) refuses
// runs likewise: 409 session_completed, VALIDATION_FAIL.
func TestSessions_HandedOffSessionIsTheHumans(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	handlerstest.PutAgent(t, env, "agent-a", func(s *agents.AgentSpec) { s.MaxTurns = 0 })
	model := routedTo("research", router.PatternReact)
	model.On(llm.TaskAct, llmtest.ToolCall("h-1", orch.ToolHandoffToHuman, `{"reason":"wants a person"}`))
	f := patternFlow(t, env, model)
	parked, _ := humanHandoffRun(t, env, f, "run-ho")
	sessions := &runctl.Sessions{KV: env.Sessions}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Sessions: sessions, Gates: env.Gates, RunTimeout: time.Second})
	for _, body := range []string{
		`{"user_id":"user-1","session_id":"` + handlerstest.Session + `","message":"hello?","agent_id":"agent-a"}`,
		`{"user_id":"user-1","session_id":"` + handlerstest.Session + `","message":"hello?"}`,
	} {
		handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/run", Headers: handlerstest.AsTenant(handlerstest.Tenant), Body: body,
			WantStatus: http.StatusConflict, WantCode: orch.SessionRefusedHandedOff})
	}
	handlerstest.Call(t, srv, handlerstest.Tenant, "POST", "/agent/triggers", `{"name":"all","agent_id":"agent-a","event_type":"message.new","conditions":{}}`).
		Want(t, "trigger", http.StatusCreated)
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/events", Headers: handlerstest.AsTenant(handlerstest.Tenant),
		Body:       `{"event_type":"message.new","user_id":"user-1","session_id":"` + handlerstest.Session + `","message":"still there?"}`,
		WantStatus: http.StatusConflict, WantCode: orch.SessionRefusedHandedOff})
	// Another session is not affected: its triggered run starts.
	other := handlerstest.Call(t, srv, handlerstest.Tenant, "POST", "/agent/events",
		`{"event_type":"message.new","user_id":"user-1","session_id":"sess-2","message":"hi"}`).Want(t, "other session", http.StatusAccepted)
	if other.Str("agent_id") != "agent-a" {
		t.Fatalf("other session's run %v", other.Body)
	}

	calls := len(model.Requests())
	res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-ho-2", "agent-a"))
	if res.TerminalCode != orch.CodeReviewRequired || detailCode(t, res) != orch.SessionRefusedHandedOff || len(model.Requests()) != calls {
		t.Fatalf("a run in the handed-off session ended %s (%s), %d model calls; trace %v", res.TerminalCode, res.Detail,
			len(model.Requests())-calls, traceNames(seen))
	}
	sess, _, err := sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.State != orch.SessionHandedOff || sess.Handoff == nil || sess.Handoff.GateID != parked.Gate.Gate {
		t.Fatalf("the handoff is no longer open: %+v, %v", sess, err)
	}

	t.Run("completed", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		handlerstest.PutAgent(t, env, "agent-a", func(s *agents.AgentSpec) { s.MaxTurns, s.HandoffBehavior = 1, orch.HandoffEnd })
		f := patternFlow(t, env, loopCalling(t, `{"status":"active"}`))
		f.drive(t, handlerstest.AgentRunRequested(t, "run-c1", "agent-a"))
		if res, _ := f.drive(t, handlerstest.AgentRunRequested(t, "run-c2", "agent-a")); res.TerminalCode != orch.CodeBudgetExhausted {
			t.Fatalf("second run %s", res.TerminalCode)
		}
		srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Sessions: &runctl.Sessions{KV: env.Sessions}, RunTimeout: time.Second})
		handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/run", Headers: handlerstest.AsTenant(handlerstest.Tenant),
			Body:       `{"user_id":"user-1","session_id":"` + handlerstest.Session + `","message":"again","agent_id":"agent-a"}`,
			WantStatus: http.StatusConflict, WantCode: orch.SessionRefusedCompleted})
		res, _ := f.drive(t, handlerstest.AgentRunRequested(t, "run-c3", "agent-a"))
		if res.TerminalCode != orch.CodeValidationFail || detailCode(t, res) != orch.SessionRefusedCompleted {
			t.Fatalf("a run in the completed session ended %s (%s)", res.TerminalCode, res.Detail)
		}
	})
}

// TestSessions_OperatorHandoff: POST /agent/sessions/{id}/handoff. To an
// agent: the session's agent must name the target in its sub_agents
// (else 409 handoff_refused); accepted, the session's next run acts as
// the target. To a human: the session is handed off with a packet
// (trigger operator; session.handoff.human published and agent_sessions
// updated through the projector), new runs are refused, and a reply
// resumes the session at once. Another tenant's session is 404.
func TestSessions_OperatorHandoff(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	chainAgents(t, env, "agent-a", "agent-b")
	handlerstest.PutAgent(t, env, "agent-x", func(s *agents.AgentSpec) { s.MaxTurns = 0 })
	model := loopCalling(t, `{"status":"active"}`)
	model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
	model.On(llm.TaskAct, loopAnswer(t, "B here"))
	f := patternFlow(t, env, model)
	if res, _ := f.drive(t, handlerstest.AgentRunRequested(t, "run-o1", "agent-a")); res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("first run %s", res.TerminalCode)
	}
	sessions := &runctl.Sessions{KV: env.Sessions}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Sessions: sessions, Gates: env.Gates, RunTimeout: time.Second})
	path := "/agent/sessions/" + handlerstest.Session + "/handoff"
	hdr := map[string]string{"X-Tenant-Id": handlerstest.Tenant, "X-User-Id": "operator-jo"}
	for _, c := range []handlerstest.HTTPCase{
		{Name: "other tenant", Body: `{"target_type":"human","reason":"x"}`, Headers: map[string]string{"X-Tenant-Id": "other", "X-User-Id": "op"},
			WantStatus: 404, WantCode: "not_found"},
		{Name: "bad type", Body: `{"target_type":"robot","reason":"x"}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "no reason", Body: `{"target_type":"human"}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "no target", Body: `{"target_type":"agent","reason":"x"}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "not a sub-agent", Body: `{"target_type":"agent","target_agent_id":"agent-x","reason":"x"}`, WantStatus: 409, WantCode: ingress.CodeHandoffRefused},
		{Name: "back to itself", Body: `{"target_type":"agent","target_agent_id":"agent-a","reason":"x"}`, WantStatus: 409, WantCode: ingress.CodeHandoffRefused},
	} {
		c.Method, c.Path = "POST", path
		if c.Headers == nil {
			c.Headers = hdr
		}
		t.Run(c.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, c) })
	}
	got := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Headers: hdr, WantStatus: 200,
		Body: `{"target_type":"agent","target_agent_id":"agent-b","reason":"billing specialist"}`})
	if got["agent_id"] != "agent-b" || got["handoff_depth"] != float64(1) || got["status"] != orch.SessionActive || got["by"] != "operator-jo" {
		t.Fatalf("handoff to agent-b answered %v", got)
	}
	if acc := lastAudit(t, env, "handoff.accepted"); !strings.Contains(string(acc.Data()), `"to_agent_id":"agent-b"`) {
		t.Fatalf("handoff.accepted %s", acc.Data())
	}
	res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-o2", "agent-a"))
	if res.TerminalCode != orch.CodeSuccess || !slices.Equal(selectedAgents(t, seen), []string{"agent-b"}) {
		t.Fatalf("the next run ended %s acting as %v; want agent-b", res.TerminalCode, selectedAgents(t, seen))
	}

	// To a human.
	got = handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Headers: hdr, WantStatus: 200,
		Body: `{"target_type":"human","reason":"complaint","priority":"urgent"}`})
	if got["status"] != orch.SessionHandedOff {
		t.Fatalf("handoff to a human answered %v", got)
	}
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions/" + handlerstest.Session, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
	h, _ := body["handoff"].(map[string]any)
	if h == nil || h["trigger"] != ingress.OperatorHandoff || h["priority"] != "urgent" || !strings.Contains(h["summary"].(string), handlerstest.RankTask) {
		t.Fatalf("session %v", body)
	}
	human := lastAudit(t, env, "session.handoff.human")
	if !strings.Contains(string(human.Data()), `"by":"operator-jo"`) {
		t.Fatalf("session.handoff.human %s", human.Data())
	}
	// The projector takes the ingress's session.updated into
	// agent_sessions: the operators' queue lists the session.
	if _, err := f.proj.Handle(handlerstest.Ctx(t), lastAudit(t, env, runctl.AuditSessionUpdated)); err != nil {
		t.Fatalf("project session.updated: %v", err)
	}
	queue := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions?status=handed_off", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
	if list, _ := queue["sessions"].([]any); len(list) != 1 || list[0].(map[string]any)["session_id"] != handlerstest.Session {
		t.Fatalf("handed-off queue %v", queue)
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Headers: hdr, WantStatus: 409, WantCode: orch.SessionRefusedHandedOff,
		Body: `{"target_type":"human","reason":"again"}`})
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/run", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 409,
		WantCode: orch.SessionRefusedHandedOff, Body: `{"user_id":"user-1","session_id":"` + handlerstest.Session + `","message":"hello?"}`})

	reply := "/agent/sessions/" + handlerstest.Session + "/reply"
	got = handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: reply, Headers: hdr, WantStatus: 200,
		Body: `{"message":"Sorry about that, refunded."}`})
	if got["status"] != orch.SessionActive || got["by"] != "operator-jo" {
		t.Fatalf("reply answered %v", got)
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: reply, Headers: hdr, WantStatus: 409, WantCode: "session_not_handed_off",
		Body: `{"message":"twice"}`})
	sess, _, err := sessions.Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.State != orch.SessionActive || sess.Handoff != nil || sess.AgentID != "agent-b" ||
		sess.Messages[len(sess.Messages)-1].Content != "Sorry about that, refunded." {
		t.Fatalf("session after the reply %+v, %v", sess, err)
	}
	if _, err := f.proj.Handle(handlerstest.Ctx(t), lastAudit(t, env, runctl.AuditSessionUpdated)); err != nil {
		t.Fatalf("project session.updated: %v", err)
	}
	if doc, err := env.Store.GetSession(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session); err != nil || doc.State != orch.SessionActive {
		t.Fatalf("agent_sessions after the reply %+v, %v", doc, err)
	}
}

// TestSessions_List: GET /agent/sessions lists the tenant's sessions
// newest first, by status and agent, with a limit; never another
// tenant's; a bad filter is 400.
func TestSessions_List(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, s := range []store.Session{
		{SessionID: "s-1", TenantID: handlerstest.Tenant, UserID: "u1", State: orch.SessionActive, AgentID: "agent-a"},
		{SessionID: "s-2", TenantID: handlerstest.Tenant, UserID: "u1", State: orch.SessionHandedOff, AgentID: "agent-a",
			Messages: []store.SessionMessage{{MsgID: "m", Role: runctl.RoleUser, Content: "hi"}}},
		{SessionID: "s-3", TenantID: handlerstest.Tenant, UserID: "u2", State: orch.SessionHandedOff, AgentID: "agent-b"},
		{SessionID: "s-4", TenantID: "other", UserID: "u1", State: orch.SessionHandedOff, AgentID: "agent-a"},
	} {
		s.StartedAt = base.Add(time.Duration(i) * time.Minute)
		if err := env.Store.PutSession(handlerstest.Ctx(t), s); err != nil {
			t.Fatal(err)
		}
	}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	ids := func(q string) []string {
		body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions" + q, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
		var out []string
		list, _ := body["sessions"].([]any)
		for _, s := range list {
			m := s.(map[string]any)
			if m["messages"] != nil {
				t.Errorf("the listing carries messages: %v", m)
			}
			out = append(out, m["session_id"].(string))
		}
		return out
	}
	for q, want := range map[string][]string{
		"":                                    {"s-3", "s-2", "s-1"},
		"?status=handed_off":                  {"s-3", "s-2"},
		"?agent_id=agent-a":                   {"s-2", "s-1"},
		"?status=handed_off&agent_id=agent-a": {"s-2"},
		"?limit=1":                            {"s-3"},
		"?status=completed":                   nil,
	} {
		if got := ids(q); !slices.Equal(got, want) {
			t.Errorf("GET /agent/sessions%s = %v; want %v", q, got, want)
		}
	}
	for _, q := range []string{"?status=open", "?limit=0", "?limit=x", "?agent_id=a%20b"} {
		handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions" + q, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 400, WantCode: "invalid_request"})
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions", WantStatus: 400, WantCode: "tenant_required"})
}
