package ingress_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/store"
)

// TestIngressAgentsCRUD: create with the seed's defaults, read, list,
// replace with optimistic concurrency, delete; every validation rule of
// the seed's contract answers its code.
func TestIngressAgentsCRUD(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{MaxBodyBytes: 64 << 10})
	const tenant = "acme"
	created := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Support","system_prompt":"Help the customer.","tools":["lookup_invoice"]}`).
		Want(t, "create", http.StatusCreated)
	id := created.Str("agent_id")
	if !strings.HasPrefix(id, "agent-") || created.Version() != 1 || created.Etag != `"1"` || created.Str("tenant_id") != tenant {
		t.Fatalf("created %v (ETag %s)", created.Body, created.Etag)
	}
	if created.Str("type") != agents.TypeStandard || created.Str("model") != agents.DefaultModel || created.Body["max_turns"] != float64(10) ||
		created.Str("handoff_behavior") != agents.HandoffEscalate || created.Str("status") != agents.StatusActive {
		t.Fatalf("defaults not applied: %v", created.Body)
	}
	got := handlerstest.Call(t, srv, tenant, "GET", "/agent/agents/"+id, "").Want(t, "get", http.StatusOK)
	if got.Str("system_prompt") != "Help the customer." || got.Etag != `"1"` {
		t.Fatalf("got %v", got.Body)
	}

	for _, c := range []struct{ name, body, code, field string }{
		{"no name", `{"system_prompt":"x"}`, agents.CodeNameRequired, "name"},
		{"no system prompt", `{"name":"x"}`, agents.CodeSystemPromptRequired, "system_prompt"},
		{"bad type", `{"name":"x","system_prompt":"x","type":"swarm"}`, agents.CodeInvalidType, "type"},
		{"bad model", `{"name":"x","system_prompt":"x","model":"a b"}`, agents.CodeInvalidModel, "model"},
		{"bad temperature", `{"name":"x","system_prompt":"x","model_config":{"temperature":2}}`, agents.CodeInvalidModelConfig, "model_config.temperature"},
		{"bad tool", `{"name":"x","system_prompt":"x","tools":["a b"]}`, agents.CodeInvalidTool, "tools[0]"},
		{"supervisor alone", `{"name":"x","system_prompt":"x","type":"supervisor"}`, agents.CodeSubAgentsRequired, "sub_agents"},
		{"standard with steps and sub-agents", `{"name":"x","system_prompt":"x","tools":["t"],"sub_agents":["` + id + `"],"steps":[` +
			`{"step_id":"a","name":"A","system_prompt":"x","tools":["t"],"is_initial":true,"is_final":true}]}`, agents.CodeSubAgentsNotAllowed, "sub_agents"},
		{"unknown sub-agent", `{"name":"x","system_prompt":"x","type":"router","sub_agents":["agent-ghost"]}`, agents.CodeUnknownAgent, "sub_agents[0]"},
		{"bad max turns", `{"name":"x","system_prompt":"x","max_turns":-3}`, agents.CodeInvalidMaxTurns, "max_turns"},
		{"bad handoff", `{"name":"x","system_prompt":"x","handoff_behavior":"transfer"}`, agents.CodeInvalidHandoffBehavior, "handoff_behavior"},
		{"bad limits", `{"name":"x","system_prompt":"x","limits":{"input_tokens":-1}}`, agents.CodeInvalidLimits, "limits"},
		{"bad status", `{"name":"x","system_prompt":"x","status":"archived"}`, agents.CodeInvalidStatus, "status"},
		{"bad steps", `{"name":"x","system_prompt":"x","steps":[{"step_id":"a","name":"A","system_prompt":"p"}]}`, agents.CodeInvalidSteps, "steps"},
	} {
		handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", c.body).Want(t, c.name, http.StatusBadRequest, c.code, c.field)
	}
	handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"x","system_prompt":"x","agent_id":"mine"}`).
		Want(t, "server-set field", http.StatusBadRequest, "unknown_field")
	handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"x","system_prompt":"x","version":4}`).
		Want(t, "create with a version", http.StatusBadRequest, "invalid_request")
	handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":`).Want(t, "bad JSON", http.StatusBadRequest, "invalid_json")
	handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"x","system_prompt":"`+strings.Repeat("x", 70<<10)+`"}`).
		Want(t, "large body", http.StatusRequestEntityTooLarge, "body_too_large")

	// Replace: the version is required, and a stale one conflicts.
	update := `{"name":"Support v2","system_prompt":"Help, briefly.","tools":["lookup_invoice","process_refund"],"max_turns":4}`
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/agents/"+id, update).Want(t, "put without version", http.StatusPreconditionRequired, "version_required")
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/agents/"+id, update, "If-Match", `"7"`).Want(t, "stale If-Match", http.StatusConflict, "version_conflict")
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/agents/"+id, `{"name":"x","system_prompt":"x","version":2}`, "If-Match", `"1"`).
		Want(t, "disagreeing versions", http.StatusBadRequest, "invalid_request")
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/agents/"+id, `{"name":"","system_prompt":"x","version":1}`).
		Want(t, "invalid update", http.StatusBadRequest, agents.CodeNameRequired, "name")
	v2 := handlerstest.Call(t, srv, tenant, "PUT", "/agent/agents/"+id, update, "If-Match", `"1"`).Want(t, "put", http.StatusOK)
	if v2.Version() != 2 || v2.Etag != `"2"` || v2.Str("name") != "Support v2" || v2.Str("created_at") != created.Str("created_at") {
		t.Fatalf("updated %v", v2.Body)
	}
	v3 := handlerstest.Call(t, srv, tenant, "PUT", "/agent/agents/"+id, `{"name":"Support v3","system_prompt":"x","version":2}`).
		Want(t, "put with the body's version", http.StatusOK)
	if v3.Version() != 3 {
		t.Fatalf("version %d, want 3", v3.Version())
	}
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/agents/"+id, update, "If-Match", `"2"`).Want(t, "lost update", http.StatusConflict, "version_conflict")

	// A supervisor over the first agent; the first cannot go while used.
	sup := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents",
		`{"name":"Lead","system_prompt":"Delegate.","type":"supervisor","sub_agents":["`+id+`"]}`).Want(t, "supervisor", http.StatusCreated)
	list := handlerstest.Call(t, srv, tenant, "GET", "/agent/agents", "").Want(t, "list", http.StatusOK)
	if n := len(list.Body["agents"].([]any)); n != 2 {
		t.Fatalf("listed %d agents, want 2", n)
	}
	if l := handlerstest.Call(t, srv, tenant, "GET", "/agent/agents?type=supervisor", "").Want(t, "list supervisors", http.StatusOK); len(l.Body["agents"].([]any)) != 1 {
		t.Fatalf("listed supervisors %v", l.Body)
	}
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/agents/"+id, "").Want(t, "delete a sub-agent", http.StatusConflict, "agent_in_use")
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/agents/"+sup.Str("agent_id"), "", "If-Match", `"9"`).
		Want(t, "stale delete", http.StatusConflict, "version_conflict")
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/agents/"+sup.Str("agent_id"), "", "If-Match", `"1"`).Want(t, "delete", http.StatusOK)
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/agents/"+id, "").Want(t, "delete the freed agent", http.StatusOK)
	handlerstest.Call(t, srv, tenant, "GET", "/agent/agents/"+id, "").Want(t, "get deleted", http.StatusNotFound, "not_found")
	handlerstest.Call(t, srv, tenant, "GET", "/agent/agents/not.an.id", "").Want(t, "malformed id", http.StatusNotFound, "not_found")
}

// TestIngressDefinitionsTenantIsolation: another tenant's agent or
// trigger answers 404 like a missing one, to reads, writes and deletes,
// and cannot be referenced.
func TestIngressDefinitionsTenantIsolation(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	agent := handlerstest.Call(t, srv, "acme", "POST", "/agent/agents", `{"name":"A","system_prompt":"x"}`).Want(t, "create agent", http.StatusCreated)
	aid := agent.Str("agent_id")
	trig := handlerstest.Call(t, srv, "acme", "POST", "/agent/triggers", `{"name":"T","agent_id":"`+aid+`","event_type":"manual"}`).
		Want(t, "create trigger", http.StatusCreated)
	tid := trig.Str("trigger_id")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/agent/agents/" + aid, ""},
		{"PUT", "/agent/agents/" + aid, `{"name":"B","system_prompt":"x","version":1}`},
		{"DELETE", "/agent/agents/" + aid, ""},
		{"GET", "/agent/triggers/" + tid, ""},
		{"PUT", "/agent/triggers/" + tid, `{"name":"B","agent_id":"` + aid + `","event_type":"manual","version":1}`},
		{"POST", "/agent/triggers/" + tid + "/disable", ""},
		{"DELETE", "/agent/triggers/" + tid, ""},
	} {
		handlerstest.Call(t, srv, "beta", c.method, c.path, c.body).Want(t, "beta "+c.method+" "+c.path, http.StatusNotFound, "not_found")
	}
	for _, path := range []string{"/agent/agents", "/agent/triggers"} {
		l := handlerstest.Call(t, srv, "beta", "GET", path, "").Want(t, "beta lists "+path, http.StatusOK)
		for _, v := range l.Body {
			if n := len(v.([]any)); n != 0 {
				t.Fatalf("beta lists %d of acme's definitions at %s", n, path)
			}
		}
	}
	handlerstest.Call(t, srv, "beta", "POST", "/agent/triggers", `{"name":"T","agent_id":"`+aid+`","event_type":"manual"}`).
		Want(t, "trigger on another tenant's agent", http.StatusBadRequest, agents.CodeUnknownAgent, "agent_id")
	handlerstest.Call(t, srv, "beta", "POST", "/agent/agents", `{"name":"S","system_prompt":"x","type":"router","sub_agents":["`+aid+`"]}`).
		Want(t, "sub-agent of another tenant", http.StatusBadRequest, agents.CodeUnknownAgent, "sub_agents[0]")
	handlerstest.Call(t, srv, "beta", "POST", "/agent/run", `{"user_id":"u1","session_id":"s1","message":"hi","agent_id":"`+aid+`"}`).
		Want(t, "run as another tenant's agent", http.StatusBadRequest, agents.CodeUnknownAgent)
	handlerstest.Call(t, srv, "", "GET", "/agent/agents", "").Want(t, "no tenant", http.StatusBadRequest, "tenant_required")
	// acme still has both, unchanged.
	if got := handlerstest.Call(t, srv, "acme", "GET", "/agent/triggers/"+tid, "").Want(t, "acme's trigger", http.StatusOK); got.Version() != 1 {
		t.Fatalf("acme's trigger changed: %v", got.Body)
	}
}

// TestIngressTriggersCRUD: triggers with the seed's conditions, listed in
// priority order, enabled and disabled as new versions; every validation
// rule answers its code.
func TestIngressTriggersCRUD(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	const tenant = "acme"
	aid := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"A","system_prompt":"x"}`).Want(t, "agent", http.StatusCreated).Str("agent_id")
	seed := `{"name":"Social support","agent_id":"` + aid + `","event_type":"message.new","priority":10,"conditions":{
		"all":[{"field":"channel.platform","operator":"in","value":["facebook","instagram"]},
		       {"field":"conversation.status","operator":"eq","value":"open"}],
		"any":[{"field":"message.text","operator":"contains","value":"help"}]}}`
	first := handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", seed).Want(t, "create", http.StatusCreated)
	tid := first.Str("trigger_id")
	if !strings.HasPrefix(tid, "trigger-") || first.Version() != 1 || first.Body["priority"] != float64(10) || first.Str("status") != "active" {
		t.Fatalf("created %v", first.Body)
	}
	dflt := handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"Fallback","agent_id":"`+aid+`","event_type":"message.new"}`).
		Want(t, "create with defaults", http.StatusCreated)
	if dflt.Body["priority"] != float64(agents.DefaultPriority) {
		t.Fatalf("default priority %v", dflt.Body["priority"])
	}
	top := handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"Urgent","agent_id":"`+aid+`","event_type":"webhook","priority":0}`).
		Want(t, "priority 0", http.StatusCreated)

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
		handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", c.body).Want(t, c.name, http.StatusBadRequest, c.code, c.field)
	}
	handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"x","agent_id":"`+aid+`","event_type":"manual","conditions":{"none":[]}}`).
		Want(t, "unknown condition list", http.StatusBadRequest, "unknown_field")
	handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"x","agent_id":"`+aid+`","event_type":"manual","priority":1.5}`).
		Want(t, "fractional priority", http.StatusBadRequest, "invalid_json")

	list := handlerstest.Call(t, srv, tenant, "GET", "/agent/triggers", "").Want(t, "list", http.StatusOK)
	var order []string
	for _, v := range list.Body["triggers"].([]any) {
		order = append(order, v.(map[string]any)["trigger_id"].(string))
	}
	if want := []string{top.Str("trigger_id"), tid, dflt.Str("trigger_id")}; !slices.Equal(order, want) {
		t.Fatalf("listed %v, want priority order %v", order, want)
	}
	if l := handlerstest.Call(t, srv, tenant, "GET", "/agent/triggers?event_type=webhook", "").Want(t, "filter", http.StatusOK); len(l.Body["triggers"].([]any)) != 1 {
		t.Fatalf("webhook triggers %v", l.Body)
	}

	off := handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/disable", "").Want(t, "disable", http.StatusOK)
	if off.Str("status") != agents.StatusInactive || off.Version() != 2 {
		t.Fatalf("disabled %v", off.Body)
	}
	if again := handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/disable", "").Want(t, "disable twice", http.StatusOK); again.Version() != 2 {
		t.Fatalf("disabling a disabled trigger made version %d", again.Version())
	}
	handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/enable", "", "If-Match", `"1"`).Want(t, "stale enable", http.StatusConflict, "version_conflict")
	on := handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers/"+tid+"/enable", "", "If-Match", `"2"`).Want(t, "enable", http.StatusOK)
	if on.Str("status") != agents.StatusActive || on.Version() != 3 || on.Body["conditions"] == nil {
		t.Fatalf("enabled %v", on.Body)
	}
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/triggers/"+tid, `{"name":"y","agent_id":"`+aid+`","event_type":"manual"}`).
		Want(t, "put without version", http.StatusPreconditionRequired, "version_required")
	put := handlerstest.Call(t, srv, tenant, "PUT", "/agent/triggers/"+tid, `{"name":"y","agent_id":"`+aid+`","event_type":"manual","version":3}`).
		Want(t, "put", http.StatusOK)
	if put.Version() != 4 || put.Str("event_type") != "manual" || put.Body["priority"] != float64(agents.DefaultPriority) {
		t.Fatalf("replaced %v", put.Body)
	}
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/agents/"+aid, "").Want(t, "delete a triggered agent", http.StatusConflict, "agent_in_use")
	for _, id := range []string{tid, dflt.Str("trigger_id"), top.Str("trigger_id")} {
		handlerstest.Call(t, srv, tenant, "DELETE", "/agent/triggers/"+id, "").Want(t, "delete trigger", http.StatusOK)
	}
	handlerstest.Call(t, srv, tenant, "GET", "/agent/triggers/"+tid, "").Want(t, "deleted trigger", http.StatusNotFound, "not_found")
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/agents/"+aid, "").Want(t, "delete the agent", http.StatusOK)
}

// TestIngressConcurrentAgentUpdates: of editors racing from one version,
// exactly one wins; the others get version_conflict.
func TestIngressConcurrentAgentUpdates(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	id := handlerstest.Call(t, srv, "acme", "POST", "/agent/agents", `{"name":"A","system_prompt":"x"}`).Want(t, "create", http.StatusCreated).Str("agent_id")
	const editors = 5
	statuses := make([]int, editors)
	var wg sync.WaitGroup
	for i := range editors {
		wg.Go(func() {
			statuses[i] = handlerstest.Call(t, srv, "acme", "PUT", "/agent/agents/"+id,
				fmt.Sprintf(`{"name":"editor %d","system_prompt":"x","version":1}`, i)).Status
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
	d, err := env.Store.GetDefinition(handlerstest.Ctx(t), "acme", store.KindAgent, id)
	if err != nil || d.Version != 2 {
		t.Fatalf("stored version %d (%v), want 2", d.Version, err)
	}
}

// TestIngressRunNamesItsAgent: a run may name an active agent of its
// tenant; an unknown one is unknown_agent, an inactive one
// agent_inactive, both before the run is queued.
func TestIngressRunNamesItsAgent(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	draft := handlerstest.Call(t, srv, "acme", "POST", "/agent/agents", `{"name":"A","system_prompt":"x","status":"draft"}`).
		Want(t, "draft agent", http.StatusCreated).Str("agent_id")
	run := func(agentID string) handlerstest.DefResponse {
		return handlerstest.Call(t, srv, "acme", "POST", "/agent/run", `{"user_id":"u1","session_id":"s1","message":"hi","agent_id":"`+agentID+`"}`)
	}
	run("agent-ghost").Want(t, "unknown agent", http.StatusBadRequest, agents.CodeUnknownAgent)
	run(draft).Want(t, "draft agent", http.StatusConflict, agents.CodeAgentInactive)
	run("a.b").Want(t, "malformed agent id", http.StatusBadRequest, "invalid_request")
}
