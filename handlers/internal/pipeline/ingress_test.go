package pipeline

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

func newIngressServer(t *testing.T, env *testEnv, cfg ingress.IngressConfig) *httptest.Server {
	t.Helper()
	g := ingress.NewIngress(env.js, env.st, nopLog, cfg)
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(g.Stop)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return srv
}

type httpCase struct {
	name       string
	method     string
	path       string
	body       string
	headers    map[string]string
	wantStatus int
	wantCode   string // error code; "" for a success body
}

func doRequest(t *testing.T, srv *httptest.Server, tc httpCase) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tc.headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", tc.method, tc.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json (body %s)", ct, b)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, b)
	}
	return resp.StatusCode, body
}

func checkHTTP(t *testing.T, srv *httptest.Server, tc httpCase) map[string]any {
	t.Helper()
	status, body := doRequest(t, srv, tc)
	if status != tc.wantStatus {
		t.Errorf("status = %d, want %d (body %v)", status, tc.wantStatus, body)
	}
	errObj, _ := body["error"].(map[string]any)
	if tc.wantCode == "" {
		if errObj != nil {
			t.Errorf("unexpected error body %v", body)
		}
		return body
	}
	if errObj == nil || errObj["code"] != tc.wantCode {
		t.Errorf("error = %v, want code %q", body, tc.wantCode)
	} else if msg, _ := errObj["message"].(string); msg == "" {
		t.Errorf("error %v has no message", errObj)
	}
	return body
}

// asTenant names the tenant of a read.
func asTenant(tenant string) map[string]string { return map[string]string{"X-Tenant-Id": tenant} }

func TestIngressRejects(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{MaxBodyBytes: 512, RunTimeout: time.Second})
	valid := `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"list outlets"}`
	cases := []httpCase{
		{name: "unknown field", method: "POST", path: "/agent/run",
			body: `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"hi","priority":9}`, wantStatus: 400, wantCode: "unknown_field"},
		{name: "invalid JSON", method: "POST", path: "/agent/run", body: `{"tenant_id":`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "not an object", method: "POST", path: "/agent/run", body: `["beta"]`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "empty body", method: "POST", path: "/agent/run", body: ``, wantStatus: 400, wantCode: "invalid_json"},
		{name: "oversize body", method: "POST", path: "/agent/run",
			body: `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"` + strings.Repeat("x", 600) + `"}`, wantStatus: 413, wantCode: "body_too_large"},
		{name: "tenant header mismatch", method: "POST", path: "/agent/run", body: valid,
			headers: map[string]string{"X-Tenant-Id": "acme"}, wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "user header mismatch", method: "POST", path: "/agent/run", body: valid,
			headers: map[string]string{"X-User-Id": "u2"}, wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "session header mismatch", method: "POST", path: "/agent/run", body: valid,
			headers: map[string]string{"X-Session-Id": "s2"}, wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "invalid tenant", method: "POST", path: "/agent/run",
			body: `{"tenant_id":"a.b","user_id":"u1","session_id":"s1","message":"hi"}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "header tenant invalid", method: "POST", path: "/agent/run",
			body: `{"user_id":"u1","session_id":"s1","message":"hi"}`, headers: map[string]string{"X-Tenant-Id": "a b"}, wantStatus: 400, wantCode: "invalid_request"},
		{name: "empty message", method: "POST", path: "/agent/run",
			body: `{"tenant_id":"beta","user_id":"u1","session_id":"s1","message":"  "}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "missing plan", method: "GET", path: "/agent/plans/missing", headers: asTenant(testTenant), wantStatus: 404, wantCode: "not_found"},
		{name: "missing plan trace", method: "GET", path: "/agent/plans/missing/trace", headers: asTenant(testTenant), wantStatus: 404, wantCode: "not_found"},
		{name: "read without tenant", method: "GET", path: "/agent/plans/missing", wantStatus: 400, wantCode: "tenant_required"},
		{name: "read with invalid tenant", method: "GET", path: "/agent/plans/missing", headers: asTenant("a.*"), wantStatus: 400, wantCode: "invalid_request"},
		{name: "unknown route", method: "GET", path: "/agent/nothing", wantStatus: 404, wantCode: "not_found"},
		{name: "unknown method", method: "DELETE", path: "/agent/run", wantStatus: 404, wantCode: "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkHTTP(t, srv, tc) })
	}
}

func TestIngressReadsPlans(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{})
	ctx := testCtx(t)
	plan := store.Plan{PlanID: "plan-read", TenantID: testTenant, SessionID: testSession, Status: store.PlanStatusExecuting,
		Steps: []store.PlanStep{{StepIndex: 1, Task: "list", Status: store.StepStatusRunning}}}
	if err := env.st.PutPlan(ctx, plan, 3); err != nil {
		t.Fatal(err)
	}
	if err := env.st.AppendEvents(ctx, []store.Event{
		{EventID: "e1", TenantID: testTenant, SessionID: testSession, PlanID: "plan-read", EventType: "plan.received", TS: time.Now().UTC()},
		{EventID: "e2", TenantID: testTenant, SessionID: testSession, PlanID: "plan-other", EventType: "plan.received", TS: time.Now().UTC()},
	}); err != nil {
		t.Fatal(err)
	}

	body := checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/plans/plan-read", headers: asTenant(testTenant), wantStatus: 200})
	got, _ := body["plan"].(map[string]any)
	if body["version"] != 3.0 || got["plan_id"] != "plan-read" || got["status"] != store.PlanStatusExecuting {
		t.Errorf("plan body = %v", body)
	}

	body = checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/plans/plan-read/trace", headers: asTenant(testTenant), wantStatus: 200})
	evs, _ := body["events"].([]any)
	if body["plan_id"] != "plan-read" || len(evs) != 1 || evs[0].(map[string]any)["event_id"] != "e1" {
		t.Errorf("trace body = %v, want only the plan's event e1", body)
	}

	// Another tenant reads the plan and its trace as missing ones.
	checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/plans/plan-read", headers: asTenant("acme"), wantStatus: 404, wantCode: "not_found"})
	checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/plans/plan-read/trace", headers: asTenant("acme"), wantStatus: 404, wantCode: "not_found"})

	body = checkHTTP(t, srv, httpCase{method: "GET", path: "/healthz", wantStatus: 200})
	if body["nats_connected"] != true {
		t.Errorf("healthz = %v", body)
	}
}

func TestIngressServiceToken(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{ServiceToken: "s3cret"})
	bearer := map[string]string{"Authorization": "Bearer s3cret", "X-Tenant-Id": testTenant}
	cases := []httpCase{
		{name: "no token", method: "GET", path: "/agent/plans/missing", wantStatus: 401, wantCode: "unauthorized"},
		{name: "wrong token", method: "GET", path: "/agent/plans/missing",
			headers: map[string]string{"Authorization": "Bearer nope"}, wantStatus: 401, wantCode: "unauthorized"},
		{name: "token without scheme", method: "GET", path: "/agent/plans/missing",
			headers: map[string]string{"Authorization": "s3cret"}, wantStatus: 401, wantCode: "unauthorized"},
		{name: "run without token", method: "POST", path: "/agent/run", body: `{}`, wantStatus: 401, wantCode: "unauthorized"},
		{name: "unknown route without token", method: "GET", path: "/x", wantStatus: 401, wantCode: "unauthorized"},
		{name: "with token", method: "GET", path: "/agent/plans/missing", headers: bearer, wantStatus: 404, wantCode: "not_found"},
		{name: "run with token reaches validation", method: "POST", path: "/agent/run", body: `{`, headers: bearer, wantStatus: 400, wantCode: "invalid_json"},
		{name: "healthz needs no token", method: "GET", path: "/healthz", wantStatus: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkHTTP(t, srv, tc) })
	}
}

// TestIngressCancel: a tenant cancels its own run (202, again 202); another
// tenant's cancel answers 404 not_found, exactly as a missing run, and
// has no effect; a finished run answers 409 run_finished.
func TestIngressCancel(t *testing.T) {
	env := newEnv(t)
	cancels := runctl.NewCancels(env.cancels)
	srv := newIngressServer(t, env, ingress.IngressConfig{Cancels: cancels})
	ctx := testCtx(t)
	put := func(runID, status string) {
		p := store.Plan{PlanID: orch.PlanID(runID), TenantID: testTenant, SessionID: testSession, Status: status}
		if err := env.st.PutPlan(ctx, p, 2); err != nil {
			t.Fatal(err)
		}
	}
	put("run-live", store.PlanStatusExecuting)
	put("run-done", store.PlanStatusComplete)
	path := func(runID string) string { return "/agent/runs/" + runID + "/cancel" }
	asUser := map[string]string{"X-Tenant-Id": testTenant, "X-User-Id": "u-7"}

	for _, tc := range []httpCase{
		{name: "other tenant", method: "POST", path: path("run-live"), headers: asTenant("acme"), wantStatus: 404, wantCode: "not_found"},
		{name: "missing run", method: "POST", path: path("run-none"), headers: asTenant(testTenant), wantStatus: 404, wantCode: "not_found"},
		{name: "run id no token", method: "POST", path: path("run.x"), headers: asTenant(testTenant), wantStatus: 404, wantCode: "not_found"},
		{name: "without tenant", method: "POST", path: path("run-live"), wantStatus: 400, wantCode: "tenant_required"},
		{name: "finished run", method: "POST", path: path("run-done"), headers: asTenant(testTenant), wantStatus: 409, wantCode: "run_finished"},
		{name: "wrong method", method: "GET", path: path("run-live"), headers: asTenant(testTenant), wantStatus: 404, wantCode: "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkHTTP(t, srv, tc) })
	}
	if keys, err := env.cancels.ListKeys(ctx); err == nil {
		for k := range keys.Keys() {
			t.Errorf("a refused cancel wrote %s", k)
		}
	}

	for range 2 { // cancelling again answers the same
		body := checkHTTP(t, srv, httpCase{method: "POST", path: path("run-live"), headers: asUser, wantStatus: 202})
		if body["run_id"] != "run-live" || body["plan_id"] != orch.PlanID("run-live") || body["status"] != "cancelling" {
			t.Errorf("cancel body = %v", body)
		}
	}
	e, err := env.cancels.Get(ctx, testTenant+".run-live")
	if err != nil {
		t.Fatalf("the cancel was not recorded: %v", err)
	}
	var c runctl.Cancel
	if err := json.Unmarshal(e.Value(), &c); err != nil || c.By != "u-7" || c.At.IsZero() {
		t.Errorf("recorded cancel %s (%v)", e.Value(), err)
	}
}
