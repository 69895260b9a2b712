package ingress_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/store"
)

// TestIngressSoulsSessionsMemory: souls, sessions and memory through the
// API, each scoped to the caller's tenant: another tenant's soul and
// session are not found, its queries never see this tenant's memories.
func TestIngressSoulsSessionsMemory(t *testing.T) {
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
	sessions := &runctl.Sessions{KV: env.Sessions}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Auth: auth.Select(keys, nil), Sessions: sessions, Embedder: handlerstest.Embedder})
	if _, err := sessions.Append(ctx, handlerstest.RunRequest("run-s1", "which outlets are open?"), "Harbour Front and Central Station", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	beta, acme := as(betaKey), as(acmeKey)

	cases := []handlerstest.HTTPCase{
		{Name: "put own soul", Method: "PUT", Path: "/agent/souls/beta", Headers: beta,
			Body: `{"persona":{"name":"Ada","system_prompt":"Answer in one line.","tone":"dry"},"policies":{"max_refund":50}}`, WantStatus: 200},
		{Name: "put a user's soul", Method: "PUT", Path: "/agent/souls/beta", Headers: beta,
			Body: `{"user_id":"user-1","persona":{"name":"Bea"}}`, WantStatus: 200},
		{Name: "get own soul", Method: "GET", Path: "/agent/souls/beta", Headers: beta, WantStatus: 200},
		{Name: "another tenant's soul", Method: "GET", Path: "/agent/souls/beta", Headers: acme, WantStatus: 404, WantCode: "not_found"},
		{Name: "put another tenant's soul", Method: "PUT", Path: "/agent/souls/beta", Headers: acme,
			Body: `{"persona":{"name":"Mallory"}}`, WantStatus: 404, WantCode: "not_found"},
		{Name: "run with an unknown budget dimension", Method: "POST", Path: "/agent/run", Headers: beta,
			Body: `{"user_id":"user-1","session_id":"s1","message":"hi","budget":{"dollars":3}}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "run with a negative budget", Method: "POST", Path: "/agent/run", Headers: beta,
			Body: `{"user_id":"user-1","session_id":"s1","message":"hi","budget":{"tool_calls":-1}}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "soul with an unknown field", Method: "PUT", Path: "/agent/souls/beta", Headers: beta,
			Body: `{"persona":{"name":"Ada"},"evil":1}`, WantStatus: 400, WantCode: "unknown_field"},
		{Name: "soul with policies not an object", Method: "PUT", Path: "/agent/souls/beta", Headers: beta,
			Body: `{"persona":{"name":"Ada"},"policies":[1]}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "missing soul", Method: "GET", Path: "/agent/souls/acme", Headers: acme, WantStatus: 404, WantCode: "not_found"},
		{Name: "own session", Method: "GET", Path: "/agent/sessions/" + handlerstest.Session, Headers: beta, WantStatus: 200},
		{Name: "another tenant's session", Method: "GET", Path: "/agent/sessions/" + handlerstest.Session, Headers: acme, WantStatus: 404, WantCode: "not_found"},
		{Name: "bad session id", Method: "GET", Path: "/agent/sessions/a.b", Headers: beta, WantStatus: 404, WantCode: "not_found"},
		{Name: "tenant fact", Method: "POST", Path: "/agent/memory", Headers: beta,
			Body: `{"scope":"tenant","label":"refunds","text":"refunds are allowed within 30 days of purchase"}`, WantStatus: 200},
		{Name: "user fact", Method: "POST", Path: "/agent/memory", Headers: beta,
			Body: `{"scope":"user","user_id":"user-1","label":"diet","text":"user-1 is vegetarian"}`, WantStatus: 200},
		{Name: "acme's tenant fact", Method: "POST", Path: "/agent/memory", Headers: acme,
			Body: `{"scope":"tenant","label":"refunds","text":"refunds within 14 days of purchase"}`, WantStatus: 200},
		{Name: "session memory is the runs'", Method: "POST", Path: "/agent/memory", Headers: beta,
			Body: `{"scope":"session","label":"x","text":"y"}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "bad label", Method: "POST", Path: "/agent/memory", Headers: beta,
			Body: `{"scope":"tenant","label":"../x","text":"y"}`, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "another user's fact", Method: "POST", Path: "/agent/memory", Headers: acme,
			Body: `{"scope":"user","user_id":"u-other","label":"x","text":"y"}`, WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "query without text", Method: "GET", Path: "/agent/memory/query?scope=tenant", Headers: beta, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "query with a bad scope", Method: "GET", Path: "/agent/memory/query?query_text=x&scope=global", Headers: beta, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "query with a bad top_k", Method: "GET", Path: "/agent/memory/query?query_text=x&top_k=1000", Headers: beta, WantStatus: 400, WantCode: "invalid_request"},
		{Name: "query naming another tenant", Method: "GET", Path: "/agent/memory/query?query_text=x&tenant_id=beta", Headers: acme, WantStatus: 403, WantCode: "identity_mismatch"},
		{Name: "user's query without scope", Method: "GET", Path: "/agent/memory/query?query_text=x", Headers: acme, WantStatus: 400, WantCode: "scope_required"},
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}

	soul := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/souls/beta?user_id=user-1", Headers: beta, WantStatus: 200})
	if p, _ := soul["persona"].(map[string]any); p["name"] != "Bea" {
		t.Errorf("user-1's soul = %v", soul)
	}
	sess := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions/" + handlerstest.Session, Headers: beta, WantStatus: 200})
	if msgs, _ := sess["messages"].([]any); len(msgs) != 2 {
		t.Errorf("session = %v, want the run's two messages", sess)
	}

	// The session's trace: its runs' events in order, none of another
	// session's or tenant's (acme's event names the same session id).
	at := time.Now().UTC()
	if err := env.Store.AppendEvents(ctx, []store.Event{
		{EventID: "s-e2", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, PlanID: "plan-2", EventType: "run.finished", TS: at.Add(time.Second)},
		{EventID: "s-e1", TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, PlanID: "plan-1", EventType: "plan.received", TS: at},
		{EventID: "s-other", TenantID: handlerstest.Tenant, SessionID: "another-session", PlanID: "plan-3", EventType: "plan.received", TS: at},
		{EventID: "s-acme", TenantID: "acme", SessionID: handlerstest.Session, PlanID: "plan-4", EventType: "plan.received", TS: at},
	}); err != nil {
		t.Fatal(err)
	}
	tr := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions/" + handlerstest.Session + "/trace", Headers: beta, WantStatus: 200})
	var ids []string
	evs, _ := tr["events"].([]any)
	for _, e := range evs {
		ids = append(ids, e.(map[string]any)["event_id"].(string))
	}
	if tr["session_id"] != handlerstest.Session || strings.Join(ids, ",") != "s-e1,s-e2" {
		t.Errorf("session trace %v: events %v, want s-e1,s-e2", tr["session_id"], ids)
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/sessions/" + handlerstest.Session + "/trace", Headers: acme, WantStatus: 404, WantCode: "not_found"})

	hitKeys := func(body map[string]any) []string {
		var keys []string
		hits, _ := body["hits"].([]any)
		for _, h := range hits {
			keys = append(keys, h.(map[string]any)["key"].(string))
		}
		return keys
	}
	// The JSON body form of the seed, and the URL form, query alike.
	got := hitKeys(handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/memory/query", Headers: beta, WantStatus: 200,
		Body: `{"query_text":"how many days for a refund of a purchase","top_k":5}`}))
	if !slices.Equal(got, []string{"beta:@tenant:refunds", "beta:@user:user-1:diet"}) {
		t.Errorf("beta's query = %v, want its own tenant fact first, then its user's", got)
	}
	got = hitKeys(handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Headers: beta, WantStatus: 200,
		Path: "/agent/memory/query?query_text=refund+of+a+purchase&scope=user&user_id=user-1"}))
	if !slices.Equal(got, []string{"beta:@user:user-1:diet"}) {
		t.Errorf("beta's user-scope query = %v", got)
	}
	got = hitKeys(handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Headers: acme, WantStatus: 200,
		Path: "/agent/memory/query?query_text=refunds+are+allowed+within+30+days+of+purchase&scope=tenant"}))
	if !slices.Equal(got, []string{"acme:@tenant:refunds"}) {
		t.Errorf("acme's query = %v, want only acme's fact", got)
	}
	got = hitKeys(handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Headers: acme, WantStatus: 200,
		Path: "/agent/memory/query?query_text=vegetarian&scope=user"}))
	if len(got) != 0 {
		t.Errorf("acme's user-scope query = %v, want nothing", got)
	}
}
