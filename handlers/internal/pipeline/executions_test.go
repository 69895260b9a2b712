package pipeline

import (
	"errors"
	"slices"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// skillCalls counts the skill.called audit events of a run's events by
// skill, and those that failed: what its execution record must list.
func skillCalls(t *testing.T, seen []event.Event) map[string][2]int {
	t.Helper()
	out := map[string][2]int{}
	for _, ev := range seen {
		if ev.Type() != events.TypeAuditPrefix+"skill.called" {
			continue
		}
		doc, err := projector.AuditDoc(ev)
		if err != nil {
			t.Fatal(err)
		}
		c := out[doc.SkillID]
		c[0]++
		if doc.Outcome == "error" {
			c[1]++
		}
		out[doc.SkillID] = c
	}
	return out
}

// TestExecutionRecords: the projector writes one execution record per
// finished run from its run.finished: a successful agent run with its
// tokens, latency, tool calls (as its skill.called events count them),
// input and output; a failed run with its error; a run without an agent.
// A redelivered run.finished leaves the same single record. GET
// /agent/executions lists them per agent and status, newest first, and
// another tenant neither lists nor reads them.
func TestExecutionRecords(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	handlerstest.PutAgent(t, env, "agent-analyst", nil)
	f := newFlow(t, env, env.Store)

	res, seen := f.drive(t, handlerstest.AgentRunRequested(t, "run-exec-ok", "agent-analyst"))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("agent run ended %s: %s", res.TerminalCode, res.Reason)
	}
	ok, err := env.Store.GetExecution(ctx, handlerstest.Tenant, "run-exec-ok")
	if err != nil {
		t.Fatalf("record of the agent run: %v", err)
	}
	if ok.Status != store.ExecutionSuccess || ok.TerminalCode != orch.CodeSuccess || ok.ErrorCode != "" ||
		ok.AgentID != "agent-analyst" || ok.SessionID != handlerstest.Session || ok.UserID != "user-1" ||
		ok.Input != handlerstest.RankTask || ok.Output != res.Response || !slices.Equal(ok.HandoffChain, []string{"agent-analyst"}) {
		t.Fatalf("record %+v", ok)
	}
	if ok.TokensIn != res.Usage.InputTokens || ok.TokensOut != res.Usage.OutputTokens || ok.TokensIn == 0 {
		t.Fatalf("record tokens %d/%d, run usage %+v", ok.TokensIn, ok.TokensOut, res.Usage)
	}
	if ok.LatencyMS < 0 || ok.CreatedAt.IsZero() {
		t.Fatalf("record latency %d, created %v", ok.LatencyMS, ok.CreatedAt)
	}
	want := skillCalls(t, seen)
	if len(want) == 0 {
		t.Fatal("the agent run called no skill: nothing to count")
	}
	got := map[string][2]int{}
	for _, c := range ok.ToolCalls {
		got[c.Name] = [2]int{c.Calls, c.Errors}
	}
	if len(got) != len(want) {
		t.Fatalf("record tool calls %v, skill.called events %v", got, want)
	}
	for name, c := range want {
		if got[name] != c {
			t.Fatalf("record tool calls %v, skill.called events %v", got, want)
		}
	}

	// A redelivered run.finished writes the same record, once.
	for _, ev := range seen {
		if ev.Type() == events.TypeAuditPrefix+"run.finished" {
			if _, err := f.proj.Handle(ctx, delivered(ev)); err != nil {
				t.Fatalf("redelivered run.finished: %v", err)
			}
		}
	}
	again, err := env.Store.GetExecution(ctx, handlerstest.Tenant, "run-exec-ok")
	if err != nil || !sameRecord(again, ok) {
		t.Fatalf("record after a redelivery %+v (%v), want %+v", again, err, ok)
	}

	// A failed run: the agent is not defined.
	failed, _ := f.drive(t, handlerstest.AgentRunRequested(t, "run-exec-failed", "agent-ghost"))
	bad, err := env.Store.GetExecution(ctx, handlerstest.Tenant, "run-exec-failed")
	if err != nil {
		t.Fatalf("record of the failed run: %v", err)
	}
	if bad.Status != store.ExecutionFailed || bad.ErrorCode != orch.CodeValidationFail || bad.ErrorReason != failed.Reason ||
		bad.TerminalCode != failed.TerminalCode || len(bad.ToolCalls) != 0 {
		t.Fatalf("failed record %+v (run %s %q)", bad, failed.TerminalCode, failed.Reason)
	}
	// A run without an agent has its record too.
	plainReq := handlerstest.RunRequest("run-exec-plain", handlerstest.RankTask)
	plainReq.SessionID = "sess-plain" // a new session: testSession continues with its agent
	plain, _ := f.drive(t, handlerstest.NewEvent(t, "run-exec-plain", events.TypeRunRequested, plainReq))
	if r, err := env.Store.GetExecution(ctx, handlerstest.Tenant, "run-exec-plain"); err != nil || r.AgentID != "" || r.SessionID != "sess-plain" ||
		r.TerminalCode != plain.TerminalCode || len(r.HandoffChain) != 0 {
		t.Fatalf("record of the run without an agent %+v: %v", r, err)
	}

	keys, err := auth.NewKeys(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	betaKey, _, err := keys.Create(ctx, handlerstest.Tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	acmeKey, _, err := keys.Create(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	otherUser, _, err := keys.Create(ctx, handlerstest.Tenant, "user-2")
	if err != nil {
		t.Fatal(err)
	}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Auth: auth.Select(keys, nil)})
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	ids := func(body map[string]any) []string {
		var out []string
		list, _ := body["executions"].([]any)
		for _, e := range list {
			out = append(out, e.(map[string]any)["execution_id"].(string))
		}
		return out
	}
	list := func(headers map[string]string, query string) []string {
		t.Helper()
		return ids(handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/executions" + query, Headers: headers, WantStatus: 200}))
	}
	if got := list(as(betaKey), ""); !slices.Equal(got, []string{"run-exec-plain", "run-exec-failed", "run-exec-ok"}) {
		t.Fatalf("all records %v, want the three runs newest first", got)
	}
	if got := list(as(betaKey), "?agent_id=agent-analyst"); !slices.Equal(got, []string{"run-exec-ok"}) {
		t.Fatalf("records of agent-analyst %v", got)
	}
	if got := list(as(betaKey), "?status=failed&limit=5"); !slices.Equal(got, []string{"run-exec-failed"}) {
		t.Fatalf("failed records %v", got)
	}
	if got := list(as(acmeKey), ""); len(got) != 0 {
		t.Fatalf("another tenant lists %v", got)
	}
	if got := list(as(otherUser), ""); len(got) != 0 {
		t.Fatalf("another user of the tenant lists %v", got)
	}
	one := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/executions/run-exec-ok", Headers: as(betaKey), WantStatus: 200})
	if one["agent_id"] != "agent-analyst" || one["status"] != "success" {
		t.Fatalf("GET record %v", one)
	}
	for _, tc := range []handlerstest.HTTPCase{
		{Name: "another tenant's record", Method: "GET", Path: "/agent/executions/run-exec-ok", Headers: as(acmeKey), WantStatus: 404, WantCode: "not_found"},
		{Name: "another user's record", Method: "GET", Path: "/agent/executions/run-exec-ok", Headers: as(otherUser), WantStatus: 404, WantCode: "not_found"},
		{Name: "no such record", Method: "GET", Path: "/agent/executions/run-none", Headers: as(betaKey), WantStatus: 404, WantCode: "not_found"},
		{Name: "bad status", Method: "GET", Path: "/agent/executions?status=done", Headers: as(betaKey), WantStatus: 400, WantCode: "invalid_request"},
		{Name: "bad since", Method: "GET", Path: "/agent/executions?since=yesterday", Headers: as(betaKey), WantStatus: 400, WantCode: "invalid_request"},
		{Name: "bad limit", Method: "GET", Path: "/agent/executions?limit=0", Headers: as(betaKey), WantStatus: 400, WantCode: "invalid_request"},
	} {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
}

// sameRecord compares two records field by field through their JSON.
func sameRecord(a, b store.Execution) bool {
	x, err1 := store.Encode(store.IndexExecutions, a)
	y, err2 := store.Encode(store.IndexExecutions, b)
	return errors.Join(err1, err2) == nil && string(x) == string(y)
}
