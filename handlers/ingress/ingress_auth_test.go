package ingress_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestIngressTenantCredentials: with tenants' API keys, the tenant of a
// request comes from its key; another tenant's plan reads as missing, and
// headers or a body that name another tenant are refused.
func TestIngressTenantCredentials(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	keys, err := auth.NewKeys(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	betaKey, _, err := keys.Create(ctx, handlerstest.Tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	acmeKey, _, err := keys.Create(ctx, "acme", "u-acme")
	if err != nil {
		t.Fatal(err)
	}
	revokedKey, rec, err := keys.Create(ctx, handlerstest.Tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Revoke(ctx, rec.KeyID); err != nil {
		t.Fatal(err)
	}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{RunTimeout: 200 * time.Millisecond, ServiceToken: "front-end",
		Auth: auth.Select(keys, nil)})
	plan := store.Plan{PlanID: "plan-beta", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, Status: store.PlanStatusComplete}
	if err := env.Store.PutPlan(ctx, plan, 1); err != nil {
		t.Fatal(err)
	}
	bearer := func(token string, extra ...string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + token}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return h
	}
	cases := []handlerstest.HTTPCase{
		{Name: "own plan", Method: "GET", Path: "/agent/plans/plan-beta", Headers: bearer(betaKey), WantStatus: 200},
		{Name: "own plan, tenant header repeated", Method: "GET", Path: "/agent/plans/plan-beta",
			Headers: bearer(betaKey, "X-Tenant-Id", handlerstest.Tenant), WantStatus: 200},
		{Name: "another tenant's plan", Method: "GET", Path: "/agent/plans/plan-beta", Headers: bearer(acmeKey), WantStatus: 404, WantCode: "not_found"},
		{Name: "another tenant's trace", Method: "GET", Path: "/agent/plans/plan-beta/trace", Headers: bearer(acmeKey), WantStatus: 404, WantCode: "not_found"},
		{Name: "header names another tenant", Method: "GET", Path: "/agent/plans/plan-beta",
			Headers: bearer(acmeKey, "X-Tenant-Id", handlerstest.Tenant), WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "header names another user", Method: "GET", Path: "/agent/plans/plan-beta",
			Headers: bearer(acmeKey, "X-User-Id", "u-other"), WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "body names another tenant", Method: "POST", Path: "/agent/run", Headers: bearer(acmeKey),
			Body: `{"tenant_id":"beta","user_id":"u-acme","session_id":"s1","message":"hi"}`, WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "body names another user", Method: "POST", Path: "/agent/run", Headers: bearer(acmeKey),
			Body: `{"user_id":"u-other","session_id":"s1","message":"hi"}`, WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "no credential", Method: "GET", Path: "/agent/plans/plan-beta", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 401, WantCode: "unauthorized"},
		{Name: "unknown key", Method: "GET", Path: "/agent/plans/plan-beta", Headers: bearer("abk_nope_nope"), WantStatus: 401, WantCode: "unauthorized"},
		{Name: "revoked key", Method: "GET", Path: "/agent/plans/plan-beta", Headers: bearer(revokedKey), WantStatus: 401, WantCode: "unauthorized"},
		{Name: "service token names the tenant", Method: "GET", Path: "/agent/plans/plan-beta",
			Headers: bearer("front-end", "X-Tenant-Id", handlerstest.Tenant), WantStatus: 200},
		{Name: "service token, another tenant", Method: "GET", Path: "/agent/plans/plan-beta",
			Headers: bearer("front-end", "X-Tenant-Id", "acme"), WantStatus: 404, WantCode: "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}

	// A run submitted with a key and no tenant in the body is the key's
	// tenant's (nothing answers it here, so it times out after queueing).
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/run", Headers: bearer(acmeKey),
		Body: `{"session_id":"s1","message":"hi"}`, WantStatus: 504, WantCode: "run_timeout"})
	runID, _ := body["run_id"].(string)
	if body["plan_id"] != orch.PlanID(runID) {
		t.Errorf("504 run_timeout names plan %v, want %s: the caller reads the run's plan with it", body["plan_id"], orch.PlanID(runID))
	}
	msg, err := env.JS.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	last, err := msg.GetLastMsgForSubject(ctx, "agent.run.requested.acme")
	if err != nil {
		t.Fatalf("no run.requested for tenant acme: %v", err)
	}
	if got := last.Header.Get("ce-" + events.ExtRun); got != runID || last.Header.Get(jetstream.MsgIDHeader) != runID {
		t.Errorf("run.requested of acme is run %q, want %q", got, runID)
	}
}
