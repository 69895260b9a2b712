package pipeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/store"
)

// TestIngressSoulsSessionsMemory: souls, sessions and memory through the
// API, each scoped to the caller's tenant: another tenant's soul and
// session are not found, its queries never see this tenant's memories.
func TestIngressSoulsSessionsMemory(t *testing.T) {
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
	sessions := &runctl.Sessions{KV: env.sessions}
	srv := newIngressServer(t, env, ingress.IngressConfig{Auth: auth.Select(keys, nil), Sessions: sessions, Embedder: testEmbedder})
	if _, err := sessions.Append(ctx, runRequest("run-s1", "which outlets are open?"), "Harbour Front and Central Station", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	beta, acme := as(betaKey), as(acmeKey)

	cases := []httpCase{
		{name: "put own soul", method: "PUT", path: "/agent/souls/beta", headers: beta,
			body: `{"persona":{"name":"Ada","system_prompt":"Answer in one line.","tone":"dry"},"policies":{"max_refund":50}}`, wantStatus: 200},
		{name: "put a user's soul", method: "PUT", path: "/agent/souls/beta", headers: beta,
			body: `{"user_id":"user-1","persona":{"name":"Bea"}}`, wantStatus: 200},
		{name: "get own soul", method: "GET", path: "/agent/souls/beta", headers: beta, wantStatus: 200},
		{name: "another tenant's soul", method: "GET", path: "/agent/souls/beta", headers: acme, wantStatus: 404, wantCode: "not_found"},
		{name: "put another tenant's soul", method: "PUT", path: "/agent/souls/beta", headers: acme,
			body: `{"persona":{"name":"Mallory"}}`, wantStatus: 404, wantCode: "not_found"},
		{name: "run with an unknown budget dimension", method: "POST", path: "/agent/run", headers: beta,
			body: `{"user_id":"user-1","session_id":"s1","message":"hi","budget":{"dollars":3}}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "run with a negative budget", method: "POST", path: "/agent/run", headers: beta,
			body: `{"user_id":"user-1","session_id":"s1","message":"hi","budget":{"tool_calls":-1}}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "soul with an unknown field", method: "PUT", path: "/agent/souls/beta", headers: beta,
			body: `{"persona":{"name":"Ada"},"evil":1}`, wantStatus: 400, wantCode: "unknown_field"},
		{name: "soul with policies not an object", method: "PUT", path: "/agent/souls/beta", headers: beta,
			body: `{"persona":{"name":"Ada"},"policies":[1]}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "missing soul", method: "GET", path: "/agent/souls/acme", headers: acme, wantStatus: 404, wantCode: "not_found"},
		{name: "own session", method: "GET", path: "/agent/sessions/" + testSession, headers: beta, wantStatus: 200},
		{name: "another tenant's session", method: "GET", path: "/agent/sessions/" + testSession, headers: acme, wantStatus: 404, wantCode: "not_found"},
		{name: "bad session id", method: "GET", path: "/agent/sessions/a.b", headers: beta, wantStatus: 404, wantCode: "not_found"},
		{name: "tenant fact", method: "POST", path: "/agent/memory", headers: beta,
			body: `{"scope":"tenant","label":"refunds","text":"refunds are allowed within 30 days of purchase"}`, wantStatus: 200},
		{name: "user fact", method: "POST", path: "/agent/memory", headers: beta,
			body: `{"scope":"user","user_id":"user-1","label":"diet","text":"user-1 is vegetarian"}`, wantStatus: 200},
		{name: "acme's tenant fact", method: "POST", path: "/agent/memory", headers: acme,
			body: `{"scope":"tenant","label":"refunds","text":"refunds within 14 days of purchase"}`, wantStatus: 200},
		{name: "session memory is the runs'", method: "POST", path: "/agent/memory", headers: beta,
			body: `{"scope":"session","label":"x","text":"y"}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "bad label", method: "POST", path: "/agent/memory", headers: beta,
			body: `{"scope":"tenant","label":"../x","text":"y"}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "another user's fact", method: "POST", path: "/agent/memory", headers: acme,
			body: `{"scope":"user","user_id":"u-other","label":"x","text":"y"}`, wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "query without text", method: "GET", path: "/agent/memory/query?scope=tenant", headers: beta, wantStatus: 400, wantCode: "invalid_request"},
		{name: "query with a bad scope", method: "GET", path: "/agent/memory/query?query_text=x&scope=global", headers: beta, wantStatus: 400, wantCode: "invalid_request"},
		{name: "query with a bad top_k", method: "GET", path: "/agent/memory/query?query_text=x&top_k=1000", headers: beta, wantStatus: 400, wantCode: "invalid_request"},
		{name: "query naming another tenant", method: "GET", path: "/agent/memory/query?query_text=x&tenant_id=beta", headers: acme, wantStatus: 403, wantCode: "identity_mismatch"},
		{name: "user's query without scope", method: "GET", path: "/agent/memory/query?query_text=x", headers: acme, wantStatus: 400, wantCode: "scope_required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkHTTP(t, srv, tc) })
	}

	soul := checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/souls/beta?user_id=user-1", headers: beta, wantStatus: 200})
	if p, _ := soul["persona"].(map[string]any); p["name"] != "Bea" {
		t.Errorf("user-1's soul = %v", soul)
	}
	sess := checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/sessions/" + testSession, headers: beta, wantStatus: 200})
	if msgs, _ := sess["messages"].([]any); len(msgs) != 2 {
		t.Errorf("session = %v, want the run's two messages", sess)
	}

	// The session's trace: its runs' events in order, none of another
	// session's or tenant's (acme's event names the same session id).
	at := time.Now().UTC()
	if err := env.st.AppendEvents(ctx, []store.Event{
		{EventID: "s-e2", TenantID: testTenant, SessionID: testSession, PlanID: "plan-2", EventType: "run.finished", TS: at.Add(time.Second)},
		{EventID: "s-e1", TenantID: testTenant, SessionID: testSession, PlanID: "plan-1", EventType: "plan.received", TS: at},
		{EventID: "s-other", TenantID: testTenant, SessionID: "another-session", PlanID: "plan-3", EventType: "plan.received", TS: at},
		{EventID: "s-acme", TenantID: "acme", SessionID: testSession, PlanID: "plan-4", EventType: "plan.received", TS: at},
	}); err != nil {
		t.Fatal(err)
	}
	tr := checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/sessions/" + testSession + "/trace", headers: beta, wantStatus: 200})
	var ids []string
	evs, _ := tr["events"].([]any)
	for _, e := range evs {
		ids = append(ids, e.(map[string]any)["event_id"].(string))
	}
	if tr["session_id"] != testSession || strings.Join(ids, ",") != "s-e1,s-e2" {
		t.Errorf("session trace %v: events %v, want s-e1,s-e2", tr["session_id"], ids)
	}
	checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/sessions/" + testSession + "/trace", headers: acme, wantStatus: 404, wantCode: "not_found"})

	hitKeys := func(body map[string]any) []string {
		var keys []string
		hits, _ := body["hits"].([]any)
		for _, h := range hits {
			keys = append(keys, h.(map[string]any)["key"].(string))
		}
		return keys
	}
	// The JSON body form of the seed, and the URL form, query alike.
	got := hitKeys(checkHTTP(t, srv, httpCase{method: "GET", path: "/agent/memory/query", headers: beta, wantStatus: 200,
		body: `{"query_text":"how many days for a refund of a purchase","top_k":5}`}))
	if !slices.Equal(got, []string{"beta:@tenant:refunds", "beta:@user:user-1:diet"}) {
		t.Errorf("beta's query = %v, want its own tenant fact first, then its user's", got)
	}
	got = hitKeys(checkHTTP(t, srv, httpCase{method: "GET", headers: beta, wantStatus: 200,
		path: "/agent/memory/query?query_text=refund+of+a+purchase&scope=user&user_id=user-1"}))
	if !slices.Equal(got, []string{"beta:@user:user-1:diet"}) {
		t.Errorf("beta's user-scope query = %v", got)
	}
	got = hitKeys(checkHTTP(t, srv, httpCase{method: "GET", headers: acme, wantStatus: 200,
		path: "/agent/memory/query?query_text=refunds+are+allowed+within+30+days+of+purchase&scope=tenant"}))
	if !slices.Equal(got, []string{"acme:@tenant:refunds"}) {
		t.Errorf("acme's query = %v, want only acme's fact", got)
	}
	got = hitKeys(checkHTTP(t, srv, httpCase{method: "GET", headers: acme, wantStatus: 200,
		path: "/agent/memory/query?query_text=vegetarian&scope=user"}))
	if len(got) != 0 {
		t.Errorf("acme's user-scope query = %v, want nothing", got)
	}
}
