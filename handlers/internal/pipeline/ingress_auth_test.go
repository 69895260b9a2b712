package pipeline

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestIngressTenantCredentials: with tenants' API keys, the tenant of a
// request comes from its key; another tenant's plan reads as missing, and
// headers or a body that name another tenant are refused.
func TestIngressTenantCredentials(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	keys, err := auth.NewKeys(ctx, env.js)
	if err != nil {
		t.Fatal(err)
	}
	betaKey, _, err := keys.Create(ctx, testTenant, "")
	if err != nil {
		t.Fatal(err)
	}
	acmeKey, _, err := keys.Create(ctx, "acme", "u-acme")
	if err != nil {
		t.Fatal(err)
	}
	revokedKey, rec, err := keys.Create(ctx, testTenant, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Revoke(ctx, rec.KeyID); err != nil {
		t.Fatal(err)
	}
	srv := newIngressServer(t, env, ingress.IngressConfig{RunTimeout: 200 * time.Millisecond, ServiceToken: "front-end",
		Auth: auth.Select(keys, nil)})
	plan := store.Plan{PlanID: "plan-beta", TenantID: testTenant, SessionID: testSession, Status: store.PlanStatusComplete}
	if err := env.st.PutPlan(ctx, plan, 1); err != nil {
		t.Fatal(err)
	}
	bearer := func(token string, extra ...string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + token}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return h
	}
	cases := []httpCase{
		{name: "own plan", method: "GET", path: "/agent/plans/plan-beta", headers: bearer(betaKey), wantStatus: 200},
		{name: "own plan, tenant header repeated", method: "GET", path: "/agent/plans/plan-beta",
			headers: bearer(betaKey, "X-Tenant-Id", testTenant), wantStatus: 200},
		{name: "another tenant's plan", method: "GET", path: "/agent/plans/plan-beta", headers: bearer(acmeKey), wantStatus: 404, wantCode: "not_found"},
		{name: "another tenant's trace", method: "GET", path: "/agent/plans/plan-beta/trace", headers: bearer(acmeKey), wantStatus: 404, wantCode: "not_found"},
		{name: "header names another tenant", method: "GET", path: "/agent/plans/plan-beta",
			headers: bearer(acmeKey, "X-Tenant-Id", testTenant), wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "header names another user", method: "GET", path: "/agent/plans/plan-beta",
			headers: bearer(acmeKey, "X-User-Id", "u-other"), wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "body names another tenant", method: "POST", path: "/agent/run", headers: bearer(acmeKey),
			body: `{"tenant_id":"beta","user_id":"u-acme","session_id":"s1","message":"hi"}`, wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "body names another user", method: "POST", path: "/agent/run", headers: bearer(acmeKey),
			body: `{"user_id":"u-other","session_id":"s1","message":"hi"}`, wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "no credential", method: "GET", path: "/agent/plans/plan-beta", headers: asTenant(testTenant), wantStatus: 401, wantCode: "unauthorized"},
		{name: "unknown key", method: "GET", path: "/agent/plans/plan-beta", headers: bearer("abk_nope_nope"), wantStatus: 401, wantCode: "unauthorized"},
		{name: "revoked key", method: "GET", path: "/agent/plans/plan-beta", headers: bearer(revokedKey), wantStatus: 401, wantCode: "unauthorized"},
		{name: "service token names the tenant", method: "GET", path: "/agent/plans/plan-beta",
			headers: bearer("front-end", "X-Tenant-Id", testTenant), wantStatus: 200},
		{name: "service token, another tenant", method: "GET", path: "/agent/plans/plan-beta",
			headers: bearer("front-end", "X-Tenant-Id", "acme"), wantStatus: 404, wantCode: "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkHTTP(t, srv, tc) })
	}

	// A run submitted with a key and no tenant in the body is the key's
	// tenant's (nothing answers it here, so it times out after queueing).
	body := checkHTTP(t, srv, httpCase{method: "POST", path: "/agent/run", headers: bearer(acmeKey),
		body: `{"session_id":"s1","message":"hi"}`, wantStatus: 504, wantCode: "run_timeout"})
	runID, _ := body["run_id"].(string)
	if body["plan_id"] != orch.PlanID(runID) {
		t.Errorf("504 run_timeout names plan %v, want %s: the caller reads the run's plan with it", body["plan_id"], orch.PlanID(runID))
	}
	msg, err := env.js.Stream(ctx, events.StreamAgent)
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
