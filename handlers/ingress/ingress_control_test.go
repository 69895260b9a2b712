package ingress_test

import (
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestIngressRunControls: the run-control endpoints answer structured
// errors with stable codes, scoped to the caller's tenant, and record what
// they accept in the run's control keys.
func TestIngressRunControls(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Cancels: runctl.NewCancels(env.Cancels), Gates: env.Gates})
	ctx := handlerstest.Ctx(t)
	for runID, status := range map[string]string{"run-live": store.PlanStatusExecuting, "run-done": store.PlanStatusComplete} {
		p := store.Plan{PlanID: orch.PlanID(runID), TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, Status: status}
		if err := env.Store.PutPlan(ctx, p, 2); err != nil {
			t.Fatal(err)
		}
	}
	path := func(runID, action string) string { return "/agent/runs/" + runID + "/" + action }
	asUser := map[string]string{"X-Tenant-Id": handlerstest.Tenant, "X-User-Id": "lead"}
	for _, tc := range []handlerstest.HTTPCase{
		{Name: "steer, other tenant", Method: "POST", Path: path("run-live", "steer"), Body: `{"message":"x"}`, Headers: handlerstest.AsTenant("acme"), WantStatus: 404, WantCode: "not_found"},
		{Name: "steer, empty", Method: "POST", Path: path("run-live", "steer"), Body: `{"message":" "}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "steer, unknown field", Method: "POST", Path: path("run-live", "steer"), Body: `{"msg":"x"}`, Headers: asUser, WantStatus: 400, WantCode: "unknown_field"},
		{Name: "steer, finished run", Method: "POST", Path: path("run-done", "steer"), Body: `{"message":"x"}`, Headers: asUser, WantStatus: 409, WantCode: "run_finished"},
		{Name: "interrupt, finished run", Method: "POST", Path: path("run-done", "interrupt"), Headers: asUser, WantStatus: 409, WantCode: "run_finished"},
		{Name: "resume, not paused", Method: "POST", Path: path("run-live", "resume"), Headers: asUser, WantStatus: 409, WantCode: "not_paused"},
		{Name: "approve, no approver", Method: "POST", Path: path("run-live", "approvals/gate-x"), Body: `{"decision":"approve"}`, Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 400, WantCode: "approver_required"},
		{Name: "approve, bad decision", Method: "POST", Path: path("run-live", "approvals/gate-x"), Body: `{"decision":"maybe"}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "approve, unknown gate", Method: "POST", Path: path("run-live", "approvals/gate-x"), Body: `{"decision":"approve"}`, Headers: asUser, WantStatus: 404, WantCode: "not_found"},
		{Name: "approvals, other tenant", Method: "GET", Path: path("run-live", "approvals"), Headers: handlerstest.AsTenant("acme"), WantStatus: 404, WantCode: "not_found"},
	} {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
	if keys, err := env.Cancels.ListKeys(ctx); err == nil {
		for k := range keys.Keys() {
			t.Errorf("a refused control wrote %s", k)
		}
	}

	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path("run-live", "interrupt"), Headers: asUser, WantStatus: 202})
	if body["status"] != "interrupting" || body["by"] != "lead" {
		t.Errorf("interrupt body %v", body)
	}
	if _, err := env.Cancels.Get(ctx, handlerstest.Tenant+".run-live.interrupt"); err != nil {
		t.Errorf("the interrupt was not recorded: %v", err)
	}
	for range runctl.MaxSteers {
		handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path("run-live", "steer"), Body: `{"message":"north first"}`, Headers: asUser, WantStatus: 202})
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path("run-live", "steer"), Body: `{"message":"one more"}`, Headers: asUser,
		WantStatus: 409, WantCode: "too_many_steers"})
	body = handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: path("run-live", "approvals"), Headers: asUser, WantStatus: 200})
	if gates, _ := body["gates"].([]any); len(gates) != 0 {
		t.Errorf("approvals of a run without gates: %v", body)
	}

	// A run parked at a gate has no hop in flight: its cancel resolves the
	// gate cancelled and sends the resolution to the router.
	parked := orch.State{Request: orch.RunRequest{RunID: "run-parked", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, UserID: handlerstest.User},
		Plan: orch.Plan{PlanID: orch.PlanID("run-parked"), Status: orch.PlanAwaitingGate}}
	if err := env.Gates.Open(ctx, parked, orch.Gate{ID: "gate-p1", Kind: orch.GateApproval}); err != nil {
		t.Fatal(err)
	}
	p := store.Plan{PlanID: orch.PlanID("run-parked"), TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, Status: store.PlanStatusAwaitingGate}
	if err := env.Store.PutPlan(ctx, p, 2); err != nil {
		t.Fatal(err)
	}
	body = handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path("run-parked", "cancel"), Headers: asUser, WantStatus: 202})
	rec, _, err := env.Gates.Get(ctx, handlerstest.Tenant, "run-parked", "gate-p1")
	if body["status"] != "cancelling" || err != nil || rec.Status != orch.GateCancelled || rec.By != "lead" {
		t.Fatalf("cancel of a parked run: body %v, gate %s by %q (%v)", body, rec.Status, rec.By, err)
	}
	msg, err := env.JS.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := msg.GetLastMsgForSubject(ctx, "agent.approval.decided."+handlerstest.Tenant); err != nil {
		t.Fatalf("no approval.decided sent for the cancelled gate: %v", err)
	}
}

// TestIngressAnswersAnElicitationGate: approving an elicitation gate
// answers its question (content); an answer its schema rejects, or one
// sent with a denial, is refused with a stable code and leaves the gate
// open; the accepted one is recorded with the schema's defaults and sent
// to the run.
func TestIngressAnswersAnElicitationGate(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Cancels: runctl.NewCancels(env.Cancels), Gates: env.Gates})
	ctx := handlerstest.Ctx(t)
	const runID = "run-asked"
	state := orch.State{Request: orch.RunRequest{RunID: runID, TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, UserID: handlerstest.User},
		Plan: orch.Plan{PlanID: orch.PlanID(runID), Status: orch.PlanAwaitingGate}}
	q := &orch.Elicitation{Message: "Which outlet?", Question: "q1",
		Schema: json.RawMessage(`{"type":"object","required":["outlet"],"properties":{"outlet":{"type":"string"},"notify":{"type":"boolean","default":true}}}`)}
	gate := orch.Gate{ID: "gate-q1", Kind: orch.GateElicitation, Actions: []orch.GateAction{{Step: 2, TaskID: "t2",
		Resume: orch.Parked{Call: orch.PendingCall{Skill: "close_outlet", ArgsHash: "h"}, Elicit: q}}}}
	if err := env.Gates.Open(ctx, state, gate); err != nil {
		t.Fatal(err)
	}
	p := store.Plan{PlanID: orch.PlanID(runID), TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, Status: store.PlanStatusAwaitingGate}
	if err := env.Store.PutPlan(ctx, p, 2); err != nil {
		t.Fatal(err)
	}
	path := "/agent/runs/" + runID + "/approvals/gate-q1"
	asUser := map[string]string{"X-Tenant-Id": handlerstest.Tenant, "X-User-Id": "lead"}
	for _, tc := range []handlerstest.HTTPCase{
		{Name: "missing required", Method: "POST", Path: path, Body: `{"decision":"approve","content":{"notify":false}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_answer"},
		{Name: "wrong type", Method: "POST", Path: path, Body: `{"decision":"approve","content":{"outlet":7}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_answer"},
		{Name: "not an object", Method: "POST", Path: path, Body: `{"decision":"approve","content":["o1"]}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_answer"},
		{Name: "no answer", Method: "POST", Path: path, Body: `{"decision":"approve"}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_answer"},
		{Name: "another step", Method: "POST", Path: path, Body: `{"decision":"approve","answers":{"2":{"outlet":"o1"},"3":{"outlet":"o2"}}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_answer"},
		{Name: "with a denial", Method: "POST", Path: path, Body: `{"decision":"deny","content":{"outlet":"o1"}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "content and answers", Method: "POST", Path: path, Body: `{"decision":"approve","content":{"outlet":"o1"},"answers":{"2":{"outlet":"o1"}}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_request"},
	} {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
	if rec, _, err := env.Gates.Get(ctx, handlerstest.Tenant, runID, "gate-q1"); err != nil || rec.Status != orch.GateOpen {
		t.Fatalf("a refused answer decided the gate: %s (%v)", rec.Status, err)
	}
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path, Body: `{"decision":"approve","content":{"outlet":"o1"}}`, Headers: asUser, WantStatus: 202})
	if body["decision"] != orch.GateApproved || body["by"] != "lead" {
		t.Fatalf("answer body %v", body)
	}
	rec, _, err := env.Gates.Get(ctx, handlerstest.Tenant, runID, "gate-q1")
	if err != nil {
		t.Fatalf("recorded answers %v (%v)", rec.Answers, err)
	}
	handlerstest.AssertJSON(t, rec.Answers[2], `{"notify":true,"outlet":"o1"}`)
	stream, err := env.JS.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, "agent.approval.decided."+handlerstest.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	var sent orch.ApprovalDecided
	if err := json.Unmarshal(m.Data, &sent); err != nil {
		t.Fatalf("approval.decided %s (%v)", m.Data, err)
	}
	handlerstest.AssertJSON(t, sent.Answers[2], string(rec.Answers[2]))
}

// TestIngressAnswersAClarifyGateAndExtendsABudgetGate: approving a
// clarify gate with content answers the run's question (a JSON string is
// its text); approving a budget gate with extend adds to the run's
// limits, within the tenant's caps. An approval without them, or an
// extension the caps leave nothing of, is refused with a stable code and
// the gate stays open; what is accepted is recorded and sent to the run.
func TestIngressAnswersAClarifyGateAndExtendsABudgetGate(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Cancels: runctl.NewCancels(env.Cancels), Gates: env.Gates})
	ctx := handlerstest.Ctx(t)
	asUser := map[string]string{"X-Tenant-Id": handlerstest.Tenant, "X-User-Id": "lead"}
	open := func(runID string, gate orch.Gate, budget orch.Budget) string {
		t.Helper()
		state := orch.State{Request: orch.RunRequest{RunID: runID, TenantID: handlerstest.Tenant, SessionID: handlerstest.Session,
			UserID: handlerstest.User}, Plan: orch.Plan{PlanID: orch.PlanID(runID), Status: orch.PlanAwaitingGate}, Budget: budget}
		if err := env.Gates.Open(ctx, state, gate); err != nil {
			t.Fatal(err)
		}
		return "/agent/runs/" + runID + "/approvals/" + gate.ID
	}
	sent := func() orch.ApprovalDecided {
		t.Helper()
		stream, err := env.JS.Stream(ctx, events.StreamAgent)
		if err != nil {
			t.Fatal(err)
		}
		m, err := stream.GetLastMsgForSubject(ctx, "agent.approval.decided."+handlerstest.Tenant)
		if err != nil {
			t.Fatal(err)
		}
		var a orch.ApprovalDecided
		if err := json.Unmarshal(m.Data, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}

	ask := open("run-asks", orch.Gate{ID: "gate-c1", Kind: orch.GateClarify,
		Question: &orch.Question{Text: "Which period?", Code: orch.CodeMissingInfo}}, orch.Budget{})
	for _, tc := range []handlerstest.HTTPCase{
		{Name: "no answer", Method: "POST", Path: ask, Body: `{"decision":"approve"}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_answer"},
		{Name: "a blank answer", Method: "POST", Path: ask, Body: `{"decision":"approve","content":"  "}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_answer"},
		{Name: "with a denial", Method: "POST", Path: ask, Body: `{"decision":"deny","content":"May"}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_request"},
	} {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: ask, Body: `{"decision":"approve","content":"the last 30 days"}`,
		Headers: asUser, WantStatus: 202})
	if rec, _, err := env.Gates.Get(ctx, handlerstest.Tenant, "run-asks", "gate-c1"); err != nil || rec.Answer != "the last 30 days" || rec.By != "lead" {
		t.Fatalf("clarify record %+v (%v)", rec, err)
	}
	if a := sent(); a.Answer != "the last 30 days" || a.Gate != "gate-c1" {
		t.Fatalf("approval.decided %+v", a)
	}

	budget := orch.Budget{Limits: orch.Vector{orch.DimToolCalls: 1, orch.DimCostUSD: 1}, Caps: orch.Vector{orch.DimToolCalls: 3}}
	ext := open("run-broke", orch.Gate{ID: "gate-b1", Kind: orch.GateBudget, Budget: &orch.BudgetStop{Reason: "tool_calls", Resume: orch.ResumeSteps}}, budget)
	for _, tc := range []handlerstest.HTTPCase{
		{Name: "no extension", Method: "POST", Path: ext, Body: `{"decision":"approve"}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_extension"},
		{Name: "the wall clock", Method: "POST", Path: ext, Body: `{"decision":"approve","extend":{"wall_clock_s":60}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_extension"},
		{Name: "an unknown dimension", Method: "POST", Path: ext, Body: `{"decision":"approve","extend":{"tokens":60}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_extension"},
		{Name: "with a denial", Method: "POST", Path: ext, Body: `{"decision":"deny","extend":{"tool_calls":1}}`, Headers: asUser, WantStatus: 400, WantCode: "invalid_request"},
	} {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: ext, Body: `{"decision":"approve","extend":{"tool_calls":5}}`,
		Headers: asUser, WantStatus: 202})
	if rec, _, err := env.Gates.Get(ctx, handlerstest.Tenant, "run-broke", "gate-b1"); err != nil || rec.Extension[orch.DimToolCalls] != 5 {
		t.Fatalf("budget record %+v (%v)", rec, err)
	}
	if a := sent(); a.Extension[orch.DimToolCalls] != 5 || a.Gate != "gate-b1" {
		t.Fatalf("approval.decided %+v", a)
	}
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/runs/run-broke/approvals", Headers: asUser, WantStatus: 200})
	gates, _ := body["gates"].([]any)
	if len(gates) != 1 || gates[0].(map[string]any)["budget"] == nil || gates[0].(map[string]any)["extension"] == nil {
		t.Fatalf("approvals %v", body)
	}
}
