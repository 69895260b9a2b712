package ingress_test

import (
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

func TestIngressRejects(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{MaxBodyBytes: 512, RunTimeout: time.Second})
	valid := `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"list outlets"}`
	cases := []handlerstest.HTTPCase{
		{Name: "unknown field", Method: "POST", Path: "/agent/run",
			Body: `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"hi","priority":9}`, WantStatus: 400, WantCode: "unknown_field"},
		{Name: "invalid JSON", Method: "POST", Path: "/agent/run", Body: `{"tenant_id":`, WantStatus: 400, WantCode: "invalid_json"},
		{Name: "not an object", Method: "POST", Path: "/agent/run", Body: `["beta"]`, WantStatus: 400, WantCode: "invalid_json"},
		{Name: "empty body", Method: "POST", Path: "/agent/run", Body: ``, WantStatus: 400, WantCode: "invalid_json"},
		{Name: "oversize body", Method: "POST", Path: "/agent/run",
			Body: `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"` + strings.Repeat("x", 600) + `"}`, WantStatus: 413, WantCode: "body_too_large"},
		{Name: "tenant header mismatch", Method: "POST", Path: "/agent/run", Body: valid,
			Headers: map[string]string{"X-Tenant-Id": "acme"}, WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "user header mismatch", Method: "POST", Path: "/agent/run", Body: valid,
			Headers: map[string]string{"X-User-Id": "u2"}, WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "session header mismatch", Method: "POST", Path: "/agent/run", Body: valid,
			Headers: map[string]string{"X-Session-Id": "s2"}, WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "invalid tenant", Method: "POST", Path: "/agent/run",
			Body: `{"tenant_id":"a.b","user_id":"u1","session_id":"s1","message":"hi"}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "header tenant invalid", Method: "POST", Path: "/agent/run",
			Body: `{"user_id":"u1","session_id":"s1","message":"hi"}`, Headers: map[string]string{"X-Tenant-Id": "a b"}, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "empty message", Method: "POST", Path: "/agent/run",
			Body: `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"  "}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "missing plan", Method: "GET", Path: "/agent/plans/missing", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 404, WantCode: "not_found"},
		{Name: "missing plan trace", Method: "GET", Path: "/agent/plans/missing/trace", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 404, WantCode: "not_found"},
		{Name: "read without tenant", Method: "GET", Path: "/agent/plans/missing", WantStatus: 400, WantCode: "tenant_required"},
		{Name: "read with invalid tenant", Method: "GET", Path: "/agent/plans/missing", Headers: handlerstest.AsTenant("a.*"), WantStatus: 400, WantCode: "invalid_request"},
		{Name: "unknown route", Method: "GET", Path: "/agent/nothing", WantStatus: 404, WantCode: "not_found"},
		{Name: "unknown method", Method: "DELETE", Path: "/agent/run", WantStatus: 404, WantCode: "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
}

func TestIngressReadsPlans(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	ctx := handlerstest.Ctx(t)
	plan := store.Plan{PlanID: "plan-read", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, Status: store.PlanStatusExecuting,
		Steps: []store.PlanStep{{StepIndex: 1, Task: "list", Status: store.StepStatusRunning}}}
	if err := env.Store.PutPlan(ctx, plan, 3); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.AppendEvents(ctx, []store.Event{
		{EventID: "e1", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, PlanID: "plan-read", EventType: "plan.received", TS: time.Now().UTC()},
		{EventID: "e2", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, PlanID: "plan-other", EventType: "plan.received", TS: time.Now().UTC()},
	}); err != nil {
		t.Fatal(err)
	}

	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/plans/plan-read", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
	got, _ := body["plan"].(map[string]any)
	if body["version"] != 3.0 || got["plan_id"] != "plan-read" || got["status"] != store.PlanStatusExecuting {
		t.Errorf("plan body = %v", body)
	}

	body = handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/plans/plan-read/trace", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
	evs, _ := body["events"].([]any)
	if body["plan_id"] != "plan-read" || len(evs) != 1 || evs[0].(map[string]any)["event_id"] != "e1" {
		t.Errorf("trace body = %v, want only the plan's event e1", body)
	}

	// Another tenant reads the plan and its trace as missing ones.
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/plans/plan-read", Headers: handlerstest.AsTenant("acme"), WantStatus: 404, WantCode: "not_found"})
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/plans/plan-read/trace", Headers: handlerstest.AsTenant("acme"), WantStatus: 404, WantCode: "not_found"})

	body = handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/healthz", WantStatus: 200})
	if body["nats_connected"] != true {
		t.Errorf("healthz = %v", body)
	}
}

func TestIngressServiceToken(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{ServiceToken: "s3cret"})
	bearer := map[string]string{"Authorization": "Bearer s3cret", "X-Tenant-Id": handlerstest.Tenant}
	cases := []handlerstest.HTTPCase{
		{Name: "no token", Method: "GET", Path: "/agent/plans/missing", WantStatus: 401, WantCode: "unauthorized"},
		{Name: "wrong token", Method: "GET", Path: "/agent/plans/missing",
			Headers: map[string]string{"Authorization": "Bearer nope"}, WantStatus: 401, WantCode: "unauthorized"},
		{Name: "token without scheme", Method: "GET", Path: "/agent/plans/missing",
			Headers: map[string]string{"Authorization": "s3cret"}, WantStatus: 401, WantCode: "unauthorized"},
		{Name: "run without token", Method: "POST", Path: "/agent/run", Body: `{}`, WantStatus: 401, WantCode: "unauthorized"},
		{Name: "unknown route without token", Method: "GET", Path: "/x", WantStatus: 401, WantCode: "unauthorized"},
		{Name: "with token", Method: "GET", Path: "/agent/plans/missing", Headers: bearer, WantStatus: 404, WantCode: "not_found"},
		{Name: "run with token reaches validation", Method: "POST", Path: "/agent/run", Body: `{`, Headers: bearer, WantStatus: 400, WantCode: "invalid_json"},
		{Name: "healthz needs no token", Method: "GET", Path: "/healthz", WantStatus: 200},
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
}

// TestIngressCancel: a tenant cancels its own run (202, again 202); another
// tenant's cancel answers 404 not_found, exactly as a missing run, and
// has no effect; a finished run answers 409 run_finished.
func TestIngressCancel(t *testing.T) {
	env := handlerstest.NewEnv(t)
	cancels := runctl.NewCancels(env.Cancels)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Cancels: cancels})
	ctx := handlerstest.Ctx(t)
	put := func(runID, status string) {
		p := store.Plan{PlanID: orch.PlanID(runID), TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, Status: status}
		if err := env.Store.PutPlan(ctx, p, 2); err != nil {
			t.Fatal(err)
		}
	}
	put("run-live", store.PlanStatusExecuting)
	put("run-done", store.PlanStatusComplete)
	path := func(runID string) string { return "/agent/runs/" + runID + "/cancel" }
	asUser := map[string]string{"X-Tenant-Id": handlerstest.Tenant, "X-User-Id": "u-7"}

	for _, tc := range []handlerstest.HTTPCase{
		{Name: "other tenant", Method: "POST", Path: path("run-live"), Headers: handlerstest.AsTenant("acme"), WantStatus: 404, WantCode: "not_found"},
		{Name: "missing run", Method: "POST", Path: path("run-none"), Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 404, WantCode: "not_found"},
		{Name: "run id no token", Method: "POST", Path: path("run.x"), Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 404, WantCode: "not_found"},
		{Name: "without tenant", Method: "POST", Path: path("run-live"), WantStatus: 400, WantCode: "tenant_required"},
		{Name: "finished run", Method: "POST", Path: path("run-done"), Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 409, WantCode: "run_finished"},
		{Name: "wrong method", Method: "GET", Path: path("run-live"), Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 404, WantCode: "not_found"},
	} {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
	if keys, err := env.Cancels.ListKeys(ctx); err == nil {
		for k := range keys.Keys() {
			t.Errorf("a refused cancel wrote %s", k)
		}
	}

	for range 2 { // cancelling again answers the same
		body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: path("run-live"), Headers: asUser, WantStatus: 202})
		if body["run_id"] != "run-live" || body["plan_id"] != orch.PlanID("run-live") || body["status"] != "cancelling" {
			t.Errorf("cancel body = %v", body)
		}
	}
	e, err := env.Cancels.Get(ctx, handlerstest.Tenant+".run-live")
	if err != nil {
		t.Fatalf("the cancel was not recorded: %v", err)
	}
	var c runctl.Cancel
	if err := json.Unmarshal(e.Value(), &c); err != nil || c.By != "u-7" || c.At.IsZero() {
		t.Errorf("recorded cancel %s (%v)", e.Value(), err)
	}
}
