package pipeline

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/store"
)

// defResponse is one answer of the definitions API.
type defResponse struct {
	status int
	etag   string
	body   map[string]any
}

// call sends one request as tenant with extra headers ("" values are not
// sent) and decodes the JSON answer.
func call(t *testing.T, srv *httptest.Server, tenant, method, path, body string, headers ...string) defResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", tenant)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := defResponse{status: resp.StatusCode, etag: resp.Header.Get("ETag")}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
	}
	return out
}

// want fails unless the answer has status and, for an error, code (and,
// for a validation error, field).
func (r defResponse) want(t *testing.T, what string, status int, code ...string) defResponse {
	t.Helper()
	errObj, _ := r.body["error"].(map[string]any)
	switch {
	case r.status != status:
		t.Fatalf("%s: status %d, want %d (%v)", what, r.status, status, r.body)
	case len(code) == 0 && errObj != nil:
		t.Fatalf("%s: unexpected error %v", what, errObj)
	case len(code) > 0 && (errObj == nil || errObj["code"] != code[0] || errObj["message"] == ""):
		t.Fatalf("%s: error %v, want code %s", what, r.body, code[0])
	case len(code) > 1 && errObj["field"] != code[1]:
		t.Fatalf("%s: error on field %v, want %s", what, errObj["field"], code[1])
	}
	return r
}

func (r defResponse) str(key string) string { s, _ := r.body[key].(string); return s }

func (r defResponse) version() int64 { f, _ := r.body["version"].(float64); return int64(f) }

// TestIngressAgentsCRUD: create with the seed's defaults, read, list,
// replace with optimistic concurrency, delete; every validation rule of
// the seed's contract answers its code.
func TestIngressAgentsCRUD(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{MaxBodyBytes: 64 << 10})
	const tenant = "acme"
	created := call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Support","system_prompt":"Help the customer.","tools":["lookup_invoice"]}`).
		want(t, "create", http.StatusCreated)
	id := created.str("agent_id")
	if !strings.HasPrefix(id, "agent-") || created.version() != 1 || created.etag != `"1"` || created.str("tenant_id") != tenant {
		t.Fatalf("created %v (ETag %s)", created.body, created.etag)
	}
	if created.str("type") != agents.TypeStandard || created.str("model") != agents.DefaultModel || created.body["max_turns"] != float64(10) ||
		created.str("handoff_behavior") != agents.HandoffEscalate || created.str("status") != agents.StatusActive {
		t.Fatalf("defaults not applied: %v", created.body)
	}
	got := call(t, srv, tenant, "GET", "/agent/agents/"+id, "").want(t, "get", http.StatusOK)
	if got.str("system_prompt") != "Help the customer." || got.etag != `"1"` {
		t.Fatalf("got %v", got.body)
	}

	for _, c := range []struct{ name, body, code, field string }{
		{"no name", `{"system_prompt":"x"}`, agents.CodeNameRequired, "name"},
		{"no system prompt", `{"name":"x"}`, agents.CodeSystemPromptRequired, "system_prompt"},
		{"bad type", `{"name":"x","system_prompt":"x","type":"swarm"}`, agents.CodeInvalidType, "type"},
		{"bad model", `{"name":"x","system_prompt":"x","model":"a b"}`, agents.CodeInvalidModel, "model"},
		{"bad temperature", `{"name":"x","system_prompt":"x","model_config":{"temperature":2}}`, agents.CodeInvalidModelConfig, "model_config.temperature"},
		{"bad tool", `{"name":"x","system_prompt":"x","tools":["a b"]}`, agents.CodeInvalidTool, "tools[0]"},
		{"supervisor alone", `{"name":"x","system_prompt":"x","type":"supervisor"}`, agents.CodeSubAgentsRequired, "sub_agents"},
		{"standard with sub-agents", `{"name":"x","system_prompt":"x","sub_agents":["` + id + `"]}`, agents.CodeSubAgentsNotAllowed, "sub_agents"},
		{"unknown sub-agent", `{"name":"x","system_prompt":"x","type":"router","sub_agents":["agent-ghost"]}`, agents.CodeUnknownAgent, "sub_agents[0]"},
		{"bad max turns", `{"name":"x","system_prompt":"x","max_turns":-3}`, agents.CodeInvalidMaxTurns, "max_turns"},
		{"bad handoff", `{"name":"x","system_prompt":"x","handoff_behavior":"transfer"}`, agents.CodeInvalidHandoffBehavior, "handoff_behavior"},
		{"bad limits", `{"name":"x","system_prompt":"x","limits":{"input_tokens":-1}}`, agents.CodeInvalidLimits, "limits"},
		{"bad status", `{"name":"x","system_prompt":"x","status":"archived"}`, agents.CodeInvalidStatus, "status"},
		{"bad steps", `{"name":"x","system_prompt":"x","steps":[{"step_id":"a","name":"A","system_prompt":"p"}]}`, agents.CodeInvalidSteps, "steps"},
	} {
		call(t, srv, tenant, "POST", "/agent/agents", c.body).want(t, c.name, http.StatusBadRequest, c.code, c.field)
	}
	call(t, srv, tenant, "POST", "/agent/agents", `{"name":"x","system_prompt":"x","agent_id":"mine"}`).
		want(t, "server-set field", http.StatusBadRequest, "unknown_field")
	call(t, srv, tenant, "POST", "/agent/agents", `{"name":"x","system_prompt":"x","version":4}`).
		want(t, "create with a version", http.StatusBadRequest, "invalid_request")
	call(t, srv, tenant, "POST", "/agent/agents", `{"name":`).want(t, "bad JSON", http.StatusBadRequest, "invalid_json")
	call(t, srv, tenant, "POST", "/agent/agents", `{"name":"x","system_prompt":"`+strings.Repeat("x", 70<<10)+`"}`).
		want(t, "large body", http.StatusRequestEntityTooLarge, "body_too_large")

	// Replace: the version is required, and a stale one conflicts.
	update := `{"name":"Support v2","system_prompt":"Help, briefly.","tools":["lookup_invoice","process_refund"],"max_turns":4}`
	call(t, srv, tenant, "PUT", "/agent/agents/"+id, update).want(t, "put without version", http.StatusPreconditionRequired, "version_required")
	call(t, srv, tenant, "PUT", "/agent/agents/"+id, update, "If-Match", `"7"`).want(t, "stale If-Match", http.StatusConflict, "version_conflict")
	call(t, srv, tenant, "PUT", "/agent/agents/"+id, `{"name":"x","system_prompt":"x","version":2}`, "If-Match", `"1"`).
		want(t, "disagreeing versions", http.StatusBadRequest, "invalid_request")
	call(t, srv, tenant, "PUT", "/agent/agents/"+id, `{"name":"","system_prompt":"x","version":1}`).
		want(t, "invalid update", http.StatusBadRequest, agents.CodeNameRequired, "name")
	v2 := call(t, srv, tenant, "PUT", "/agent/agents/"+id, update, "If-Match", `"1"`).want(t, "put", http.StatusOK)
	if v2.version() != 2 || v2.etag != `"2"` || v2.str("name") != "Support v2" || v2.str("created_at") != created.str("created_at") {
		t.Fatalf("updated %v", v2.body)
	}
	v3 := call(t, srv, tenant, "PUT", "/agent/agents/"+id, `{"name":"Support v3","system_prompt":"x","version":2}`).
		want(t, "put with the body's version", http.StatusOK)
	if v3.version() != 3 {
		t.Fatalf("version %d, want 3", v3.version())
	}
	call(t, srv, tenant, "PUT", "/agent/agents/"+id, update, "If-Match", `"2"`).want(t, "lost update", http.StatusConflict, "version_conflict")

	// A supervisor over the first agent; the first cannot go while used.
	sup := call(t, srv, tenant, "POST", "/agent/agents",
		`{"name":"Lead","system_prompt":"Delegate.","type":"supervisor","sub_agents":["`+id+`"]}`).want(t, "supervisor", http.StatusCreated)
	list := call(t, srv, tenant, "GET", "/agent/agents", "").want(t, "list", http.StatusOK)
	if n := len(list.body["agents"].([]any)); n != 2 {
		t.Fatalf("listed %d agents, want 2", n)
	}
	if l := call(t, srv, tenant, "GET", "/agent/agents?type=supervisor", "").want(t, "list supervisors", http.StatusOK); len(l.body["agents"].([]any)) != 1 {
		t.Fatalf("listed supervisors %v", l.body)
	}
	call(t, srv, tenant, "DELETE", "/agent/agents/"+id, "").want(t, "delete a sub-agent", http.StatusConflict, "agent_in_use")
	call(t, srv, tenant, "DELETE", "/agent/agents/"+sup.str("agent_id"), "", "If-Match", `"9"`).
		want(t, "stale delete", http.StatusConflict, "version_conflict")
	call(t, srv, tenant, "DELETE", "/agent/agents/"+sup.str("agent_id"), "", "If-Match", `"1"`).want(t, "delete", http.StatusOK)
	call(t, srv, tenant, "DELETE", "/agent/agents/"+id, "").want(t, "delete the freed agent", http.StatusOK)
	call(t, srv, tenant, "GET", "/agent/agents/"+id, "").want(t, "get deleted", http.StatusNotFound, "not_found")
	call(t, srv, tenant, "GET", "/agent/agents/not.an.id", "").want(t, "malformed id", http.StatusNotFound, "not_found")
}

// TestIngressDefinitionsTenantIsolation: another tenant's agent or
// trigger answers 404 like a missing one, to reads, writes and deletes,
// and cannot be referenced.
func TestIngressDefinitionsTenantIsolation(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{})
	agent := call(t, srv, "acme", "POST", "/agent/agents", `{"name":"A","system_prompt":"x"}`).want(t, "create agent", http.StatusCreated)
	aid := agent.str("agent_id")
	trig := call(t, srv, "acme", "POST", "/agent/triggers", `{"name":"T","agent_id":"`+aid+`","event_type":"manual"}`).
		want(t, "create trigger", http.StatusCreated)
	tid := trig.str("trigger_id")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/agent/agents/" + aid, ""},
		{"PUT", "/agent/agents/" + aid, `{"name":"B","system_prompt":"x","version":1}`},
		{"DELETE", "/agent/agents/" + aid, ""},
		{"GET", "/agent/triggers/" + tid, ""},
		{"PUT", "/agent/triggers/" + tid, `{"name":"B","agent_id":"` + aid + `","event_type":"manual","version":1}`},
		{"POST", "/agent/triggers/" + tid + "/disable", ""},
		{"DELETE", "/agent/triggers/" + tid, ""},
	} {
		call(t, srv, "beta", c.method, c.path, c.body).want(t, "beta "+c.method+" "+c.path, http.StatusNotFound, "not_found")
	}
	for _, path := range []string{"/agent/agents", "/agent/triggers"} {
		l := call(t, srv, "beta", "GET", path, "").want(t, "beta lists "+path, http.StatusOK)
		for _, v := range l.body {
			if n := len(v.([]any)); n != 0 {
				t.Fatalf("beta lists %d of acme's definitions at %s", n, path)
			}
		}
	}
	call(t, srv, "beta", "POST", "/agent/triggers", `{"name":"T","agent_id":"`+aid+`","event_type":"manual"}`).
		want(t, "trigger on another tenant's agent", http.StatusBadRequest, agents.CodeUnknownAgent, "agent_id")
	call(t, srv, "beta", "POST", "/agent/agents", `{"name":"S","system_prompt":"x","type":"router","sub_agents":["`+aid+`"]}`).
		want(t, "sub-agent of another tenant", http.StatusBadRequest, agents.CodeUnknownAgent, "sub_agents[0]")
	call(t, srv, "beta", "POST", "/agent/run", `{"user_id":"u1","session_id":"s1","message":"hi","agent_id":"`+aid+`"}`).
		want(t, "run as another tenant's agent", http.StatusBadRequest, agents.CodeUnknownAgent)
	call(t, srv, "", "GET", "/agent/agents", "").want(t, "no tenant", http.StatusBadRequest, "tenant_required")
	// acme still has both, unchanged.
	if got := call(t, srv, "acme", "GET", "/agent/triggers/"+tid, "").want(t, "acme's trigger", http.StatusOK); got.version() != 1 {
		t.Fatalf("acme's trigger changed: %v", got.body)
	}
}

// TestIngressTriggersCRUD: triggers with the seed's conditions, listed in
// priority order, enabled and disabled as new versions; every validation
// rule answers its code.
func TestIngressTriggersCRUD(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{})
	const tenant = "acme"
	aid := call(t, srv, tenant, "POST", "/agent/agents", `{"name":"A","system_prompt":"x"}`).want(t, "agent", http.StatusCreated).str("agent_id")
	seed := `{"name":"Social support","agent_id":"` + aid + `","event_type":"message.new","priority":10,"conditions":{
		"all":[{"field":"channel.platform","operator":"in","value":["facebook","instagram"]},
		       {"field":"conversation.status","operator":"eq","value":"open"}],
		"any":[{"field":"message.text","operator":"contains","value":"help"}]}}`
	first := call(t, srv, tenant, "POST", "/agent/triggers", seed).want(t, "create", http.StatusCreated)
	tid := first.str("trigger_id")
	if !strings.HasPrefix(tid, "trigger-") || first.version() != 1 || first.body["priority"] != float64(10) || first.str("status") != "active" {
		t.Fatalf("created %v", first.body)
	}
	dflt := call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"Fallback","agent_id":"`+aid+`","event_type":"message.new"}`).
		want(t, "create with defaults", http.StatusCreated)
	if dflt.body["priority"] != float64(agents.DefaultPriority) {
		t.Fatalf("default priority %v", dflt.body["priority"])
	}
	top := call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"Urgent","agent_id":"`+aid+`","event_type":"webhook","priority":0}`).
		want(t, "priority 0", http.StatusCreated)

	for _, c := range []struct{ name, body, code, field string }{
		{"no name", `{"agent_id":"` + aid + `","event_type":"manual"}`, agents.CodeNameRequired, "name"},
		{"no agent", `{"name":"x","event_type":"manual"}`, agents.CodeAgentRequired, "agent_id"},
		{"unknown agent", `{"name":"x","agent_id":"agent-ghost","event_type":"manual"}`, agents.CodeUnknownAgent, "agent_id"},
		{"bad event type", `{"name":"x","agent_id":"` + aid + `","event_type":"message.edited"}`, agents.CodeInvalidEventType, "event_type"},
		{"bad operator", `{"name":"x","agent_id":"` + aid + `","event_type":"manual","conditions":{"all":[{"field":"a","operator":"like","value":"b"}]}}`,
			agents.CodeInvalidOperator, "conditions.all[0].operator"},
		{"bad field", `{"name":"x","agent_id":"` + aid + `","event_type":"manual","conditions":{"any":[{"field":"","operator":"eq","value":"b"}]}}`,
			agents.CodeInvalidCondition, "conditions.any[0].field"},
		{"bad value", `{"name":"x","agent_id":"` + aid + `","event_type":"manual","conditions":{"all":[{"field":"a","operator":"in","value":"b"}]}}`,
			agents.CodeInvalidCondition, "conditions.all[0].value"},
		{"negative priority", `{"name":"x","agent_id":"` + aid + `","event_type":"manual","priority":-1}`, agents.CodeInvalidPriority, "priority"},
		{"bad status", `{"name":"x","agent_id":"` + aid + `","event_type":"manual","status":"draft"}`, agents.CodeInvalidStatus, "status"},
	} {
		call(t, srv, tenant, "POST", "/agent/triggers", c.body).want(t, c.name, http.StatusBadRequest, c.code, c.field)
	}
	call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"x","agent_id":"`+aid+`","event_type":"manual","conditions":{"none":[]}}`).
		want(t, "unknown condition list", http.StatusBadRequest, "unknown_field")
	call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"x","agent_id":"`+aid+`","event_type":"manual","priority":1.5}`).
		want(t, "fractional priority", http.StatusBadRequest, "invalid_json")

	list := call(t, srv, tenant, "GET", "/agent/triggers", "").want(t, "list", http.StatusOK)
	var order []string
	for _, v := range list.body["triggers"].([]any) {
		order = append(order, v.(map[string]any)["trigger_id"].(string))
	}
	if want := []string{top.str("trigger_id"), tid, dflt.str("trigger_id")}; !slices.Equal(order, want) {
		t.Fatalf("listed %v, want priority order %v", order, want)
	}
	if l := call(t, srv, tenant, "GET", "/agent/triggers?event_type=webhook", "").want(t, "filter", http.StatusOK); len(l.body["triggers"].([]any)) != 1 {
		t.Fatalf("webhook triggers %v", l.body)
	}

	off := call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/disable", "").want(t, "disable", http.StatusOK)
	if off.str("status") != agents.StatusInactive || off.version() != 2 {
		t.Fatalf("disabled %v", off.body)
	}
	if again := call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/disable", "").want(t, "disable twice", http.StatusOK); again.version() != 2 {
		t.Fatalf("disabling a disabled trigger made version %d", again.version())
	}
	call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/enable", "", "If-Match", `"1"`).want(t, "stale enable", http.StatusConflict, "version_conflict")
	on := call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/enable", "", "If-Match", `"2"`).want(t, "enable", http.StatusOK)
	if on.str("status") != agents.StatusActive || on.version() != 3 || on.body["conditions"] == nil {
		t.Fatalf("enabled %v", on.body)
	}
	call(t, srv, tenant, "PUT", "/agent/triggers/"+tid, `{"name":"y","agent_id":"`+aid+`","event_type":"manual"}`).
		want(t, "put without version", http.StatusPreconditionRequired, "version_required")
	put := call(t, srv, tenant, "PUT", "/agent/triggers/"+tid, `{"name":"y","agent_id":"`+aid+`","event_type":"manual","version":3}`).
		want(t, "put", http.StatusOK)
	if put.version() != 4 || put.str("event_type") != "manual" || put.body["priority"] != float64(agents.DefaultPriority) {
		t.Fatalf("replaced %v", put.body)
	}
	call(t, srv, tenant, "DELETE", "/agent/agents/"+aid, "").want(t, "delete a triggered agent", http.StatusConflict, "agent_in_use")
	for _, id := range []string{tid, dflt.str("trigger_id"), top.str("trigger_id")} {
		call(t, srv, tenant, "DELETE", "/agent/triggers/"+id, "").want(t, "delete trigger", http.StatusOK)
	}
	call(t, srv, tenant, "GET", "/agent/triggers/"+tid, "").want(t, "deleted trigger", http.StatusNotFound, "not_found")
	call(t, srv, tenant, "DELETE", "/agent/agents/"+aid, "").want(t, "delete the agent", http.StatusOK)
}

// TestIngressConcurrentAgentUpdates: of editors racing from one version,
// exactly one wins; the others get version_conflict.
func TestIngressConcurrentAgentUpdates(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{})
	id := call(t, srv, "acme", "POST", "/agent/agents", `{"name":"A","system_prompt":"x"}`).want(t, "create", http.StatusCreated).str("agent_id")
	const editors = 5
	statuses := make([]int, editors)
	var wg sync.WaitGroup
	for i := range editors {
		wg.Go(func() {
			statuses[i] = call(t, srv, "acme", "PUT", "/agent/agents/"+id,
				fmt.Sprintf(`{"name":"editor %d","system_prompt":"x","version":1}`, i)).status
		})
	}
	wg.Wait()
	if ok := slices.Index(statuses, http.StatusOK); ok < 0 || slices.Index(statuses[ok+1:], http.StatusOK) >= 0 {
		t.Fatalf("statuses %v, want exactly one 200", statuses)
	}
	for _, s := range statuses {
		if s != http.StatusOK && s != http.StatusConflict {
			t.Fatalf("statuses %v", statuses)
		}
	}
	d, err := env.st.GetDefinition(testCtx(t), "acme", store.KindAgent, id)
	if err != nil || d.Version != 2 {
		t.Fatalf("stored version %d (%v), want 2", d.Version, err)
	}
}

// TestIngressRunNamesItsAgent: a run may name an active agent of its
// tenant; an unknown one is unknown_agent, an inactive one
// agent_inactive, both before the run is queued.
func TestIngressRunNamesItsAgent(t *testing.T) {
	env := newEnv(t)
	srv := newIngressServer(t, env, ingress.IngressConfig{})
	draft := call(t, srv, "acme", "POST", "/agent/agents", `{"name":"A","system_prompt":"x","status":"draft"}`).
		want(t, "draft agent", http.StatusCreated).str("agent_id")
	run := func(agentID string) defResponse {
		return call(t, srv, "acme", "POST", "/agent/run", `{"user_id":"u1","session_id":"s1","message":"hi","agent_id":"`+agentID+`"}`)
	}
	run("agent-ghost").want(t, "unknown agent", http.StatusBadRequest, agents.CodeUnknownAgent)
	run(draft).want(t, "draft agent", http.StatusConflict, agents.CodeAgentInactive)
	run("a.b").want(t, "malformed agent id", http.StatusBadRequest, "invalid_request")
}
