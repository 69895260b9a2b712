package pipeline

import (
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestIngressRunControls: the run-control endpoints answer structured
// errors with stable codes, scoped to the caller's tenant, and record what
// they accept in the run's control keys.
func TestIngressRunControls(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{Cancels: runctl.NewCancels(env.cancels), Gates: env.gates})
	ctx := testCtx(t)
	for runID, status := range map[string]string{"run-live": store.PlanStatusExecuting, "run-done": store.PlanStatusComplete} {
		p := store.Plan{PlanID: orch.PlanID(runID), TenantID: testTenant, SessionID: testSession, Status: status}
		if err := env.st.PutPlan(ctx, p, 2); err != nil {
			t.Fatal(err)
		}
	}
	path := func(runID, action string) string { return "/agent/runs/" + runID + "/" + action }
	asUser := map[string]string{"X-Tenant-Id": testTenant, "X-User-Id": "lead"}
	for _, tc := range []httpCase{
		{name: "steer, other tenant", method: "POST", path: path("run-live", "steer"), body: `{"message":"x"}`, headers: asTenant("acme"), wantStatus: 404, wantCode: "not_found"},
		{name: "steer, empty", method: "POST", path: path("run-live", "steer"), body: `{"message":" "}`, headers: asUser, wantStatus: 400, wantCode: "invalid_request"},
		{name: "steer, unknown field", method: "POST", path: path("run-live", "steer"), body: `{"msg":"x"}`, headers: asUser, wantStatus: 400, wantCode: "unknown_field"},
		{name: "steer, finished run", method: "POST", path: path("run-done", "steer"), body: `{"message":"x"}`, headers: asUser, wantStatus: 409, wantCode: "run_finished"},
		{name: "interrupt, finished run", method: "POST", path: path("run-done", "interrupt"), headers: asUser, wantStatus: 409, wantCode: "run_finished"},
		{name: "resume, not paused", method: "POST", path: path("run-live", "resume"), headers: asUser, wantStatus: 409, wantCode: "not_paused"},
		{name: "approve, no approver", method: "POST", path: path("run-live", "approvals/gate-x"), body: `{"decision":"approve"}`, headers: asTenant(testTenant), wantStatus: 400, wantCode: "approver_required"},
		{name: "approve, bad decision", method: "POST", path: path("run-live", "approvals/gate-x"), body: `{"decision":"maybe"}`, headers: asUser, wantStatus: 400, wantCode: "invalid_request"},
		{name: "approve, unknown gate", method: "POST", path: path("run-live", "approvals/gate-x"), body: `{"decision":"approve"}`, headers: asUser, wantStatus: 404, wantCode: "not_found"},
		{name: "approvals, other tenant", method: "GET", path: path("run-live", "approvals"), headers: asTenant("acme"), wantStatus: 404, wantCode: "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkHTTP(t, srv, tc) })
	}
	if keys, err := env.cancels.ListKeys(ctx); err == nil {
		for k := range keys.Keys() {
			t.Errorf("a refused control wrote %s", k)
		}
	}

	body := checkHTTP(t, srv, httpCase{method: "POST", path: path("run-live", "interrupt"), headers: asUser, wantStatus: 202})
	if body["status"] != "interrupting" || body["by"] != "lead" {
		t.Errorf("interrupt body %v", body)
	}
	if _, err := env.cancels.Get(ctx, testTenant+".run-live.interrupt"); err != nil {
		t.Errorf("the interrupt was not recorded: %v", err)
	}
	for range runctl.MaxSteers {
		checkHTTP(t, srv, httpCase{method: "POST", path: path("run-live", "steer"), body: `{"message":"north first"}`, headers: asUser, wantStatus: 202})
	}
	checkHTTP(t, srv, httpCase{method: "POST", path: path("run-live", "steer"), body: `{"message":"one more"}`, headers: asUser,
		wantStatus: 409, wantCode: "too_many_steers"})
	body = checkHTTP(t, srv, httpCase{method: "GET", path: path("run-live", "approvals"), headers: asUser, wantStatus: 200})
	if gates, _ := body["gates"].([]any); len(gates) != 0 {
		t.Errorf("approvals of a run without gates: %v", body)
	}

	// A run parked at a gate has no hop in flight: its cancel resolves the
	// gate cancelled and sends the resolution to the router.
	parked := orch.State{Request: orch.RunRequest{RunID: "run-parked", TenantID: testTenant, SessionID: testSession, UserID: testUser},
		Plan: orch.Plan{PlanID: orch.PlanID("run-parked"), Status: orch.PlanAwaitingGate}}
	if err := env.gates.Open(ctx, parked, orch.Gate{ID: "gate-p1", Kind: orch.GateApproval}); err != nil {
		t.Fatal(err)
	}
	p := store.Plan{PlanID: orch.PlanID("run-parked"), TenantID: testTenant, SessionID: testSession, Status: store.PlanStatusAwaitingGate}
	if err := env.st.PutPlan(ctx, p, 2); err != nil {
		t.Fatal(err)
	}
	body = checkHTTP(t, srv, httpCase{method: "POST", path: path("run-parked", "cancel"), headers: asUser, wantStatus: 202})
	rec, _, err := env.gates.Get(ctx, testTenant, "run-parked", "gate-p1")
	if body["status"] != "cancelling" || err != nil || rec.Status != orch.GateCancelled || rec.By != "lead" {
		t.Fatalf("cancel of a parked run: body %v, gate %s by %q (%v)", body, rec.Status, rec.By, err)
	}
	msg, err := env.js.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := msg.GetLastMsgForSubject(ctx, "agent.approval.decided."+testTenant); err != nil {
		t.Fatalf("no approval.decided sent for the cancelled gate: %v", err)
	}
}

// TestIngressAnswersAnElicitationGate: approving an elicitation gate
// answers its question (content); an answer its schema rejects, or one
// sent with a denial, is refused with a stable code and leaves the gate
// open; the accepted one is recorded with the schema's defaults and sent
// to the run.
func TestIngressAnswersAnElicitationGate(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{Cancels: runctl.NewCancels(env.cancels), Gates: env.gates})
	ctx := testCtx(t)
	const runID = "run-asked"
	state := orch.State{Request: orch.RunRequest{RunID: runID, TenantID: testTenant, SessionID: testSession, UserID: testUser},
		Plan: orch.Plan{PlanID: orch.PlanID(runID), Status: orch.PlanAwaitingGate}}
	q := &orch.Elicitation{Message: "Which outlet?", Question: "q1",
		Schema: json.RawMessage(`{"type":"object","required":["outlet"],"properties":{"outlet":{"type":"string"},"notify":{"type":"boolean","default":true}}}`)}
	gate := orch.Gate{ID: "gate-q1", Kind: orch.GateElicitation, Actions: []orch.GateAction{{Step: 2, TaskID: "t2",
		Resume: orch.Parked{Call: orch.PendingCall{Skill: "close_outlet", ArgsHash: "h"}, Elicit: q}}}}
	if err := env.gates.Open(ctx, state, gate); err != nil {
		t.Fatal(err)
	}
	p := store.Plan{PlanID: orch.PlanID(runID), TenantID: testTenant, SessionID: testSession, Status: store.PlanStatusAwaitingGate}
	if err := env.st.PutPlan(ctx, p, 2); err != nil {
		t.Fatal(err)
	}
	path := "/agent/runs/" + runID + "/approvals/gate-q1"
	asUser := map[string]string{"X-Tenant-Id": testTenant, "X-User-Id": "lead"}
	for _, tc := range []httpCase{
		{name: "missing required", method: "POST", path: path, body: `{"decision":"approve","content":{"notify":false}}`, headers: asUser, wantStatus: 400, wantCode: "invalid_answer"},
		{name: "wrong type", method: "POST", path: path, body: `{"decision":"approve","content":{"outlet":7}}`, headers: asUser, wantStatus: 400, wantCode: "invalid_answer"},
		{name: "not an object", method: "POST", path: path, body: `{"decision":"approve","content":["o1"]}`, headers: asUser, wantStatus: 400, wantCode: "invalid_answer"},
		{name: "no answer", method: "POST", path: path, body: `{"decision":"approve"}`, headers: asUser, wantStatus: 400, wantCode: "invalid_answer"},
		{name: "another step", method: "POST", path: path, body: `{"decision":"approve","answers":{"2":{"outlet":"o1"},"3":{"outlet":"o2"}}}`, headers: asUser, wantStatus: 400, wantCode: "invalid_answer"},
		{name: "with a denial", method: "POST", path: path, body: `{"decision":"deny","content":{"outlet":"o1"}}`, headers: asUser, wantStatus: 400, wantCode: "invalid_request"},
		{name: "content and answers", method: "POST", path: path, body: `{"decision":"approve","content":{"outlet":"o1"},"answers":{"2":{"outlet":"o1"}}}`, headers: asUser, wantStatus: 400, wantCode: "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkHTTP(t, srv, tc) })
	}
	if rec, _, err := env.gates.Get(ctx, testTenant, runID, "gate-q1"); err != nil || rec.Status != orch.GateOpen {
		t.Fatalf("a refused answer decided the gate: %s (%v)", rec.Status, err)
	}
	body := checkHTTP(t, srv, httpCase{method: "POST", path: path, body: `{"decision":"approve","content":{"outlet":"o1"}}`, headers: asUser, wantStatus: 202})
	if body["decision"] != orch.GateApproved || body["by"] != "lead" {
		t.Fatalf("answer body %v", body)
	}
	rec, _, err := env.gates.Get(ctx, testTenant, runID, "gate-q1")
	if err != nil || !runctl.SameJSON(rec.Answers[2], json.RawMessage(`{"notify":true,"outlet":"o1"}`)) {
		t.Fatalf("recorded answers %v (%v)", rec.Answers, err)
	}
	stream, err := env.js.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, "agent.approval.decided."+testTenant)
	if err != nil {
		t.Fatal(err)
	}
	var sent orch.ApprovalDecided
	if err := json.Unmarshal(m.Data, &sent); err != nil || !runctl.SameJSON(sent.Answers[2], rec.Answers[2]) {
		t.Fatalf("approval.decided %s (%v)", m.Data, err)
	}
}
