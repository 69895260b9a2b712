package a2a_test

import (
	"net/http"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/a2a"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
)

// rpcAnswer is a JSON-RPC response with a task result.
type rpcAnswer struct {
	Result *a2a.Task  `json:"result"`
	Error  *a2a.Error `json:"error"`
}

// call posts one JSON-RPC call to path as tenant.
func call(t *testing.T, srv string, tenant, path, method, params string) rpcAnswer {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequest("POST", srv+path, strings.NewReader(body))
	req.Header.Set("X-Tenant-Id", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out rpcAnswer
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("%s: HTTP %d", method, resp.StatusCode)
	}
	return out
}

func wantCode(t *testing.T, what string, a rpcAnswer, code int) {
	t.Helper()
	if a.Error == nil || a.Error.Code != code || a.Result != nil {
		t.Errorf("%s: %+v %+v, want error %d", what, a.Error, a.Result, code)
	}
}

// TestTasksOverGates: a run parked at a clarify gate is an input-required
// task whose status message is the question and how to reply; another
// tenant does not find it; a reply to it with text answers the question
// (the approver is the context's user when the caller names none). At an
// approval gate a reply that neither approves nor denies is InvalidParams
// and "deny" with a comment rejects the gate. A cancel of a parked task
// cancels it; a missing task is TaskNotFound; malformed calls get
// JSON-RPC's codes.
func TestTasksOverGates(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Cancels: runctl.NewCancels(env.Cancels), Gates: env.Gates,
		Adapters: []ingress.Adapter{a2a.Adapter{}}}).URL
	ctx, tenant := handlerstest.Ctx(t), handlerstest.Tenant
	park := func(runID string, gate orch.Gate) {
		t.Helper()
		state := orch.State{Request: orch.RunRequest{RunID: runID, TenantID: tenant, SessionID: handlerstest.Session,
			UserID: handlerstest.User}, Plan: orch.Plan{PlanID: orch.PlanID(runID), Status: orch.PlanAwaitingGate}}
		if err := env.Gates.Open(ctx, state, gate); err != nil {
			t.Fatal(err)
		}
	}
	park("run-asks", orch.Gate{ID: "gate-c1", Kind: orch.GateClarify, Question: &orch.Question{Text: "Which period?", Code: orch.CodeMissingInfo}})

	got := call(t, srv, tenant, "/a2a", "tasks/get", `{"id":"run-asks"}`)
	task := got.Result
	if task == nil || task.ID != "run-asks" || task.ContextID != handlerstest.Session || task.Status.State != a2a.StateInputRequired ||
		task.Status.Message == nil || len(task.Status.Message.Parts) != 2 {
		t.Fatalf("tasks/get: %+v %+v", task, got.Error)
	}
	msg := task.Status.Message.Parts
	if !strings.Contains(msg[0].Text, "The run asks: Which period?") || !strings.Contains(msg[0].Text, "Reply to this task with the answer as text") ||
		msg[1].Kind != "data" || !strings.Contains(string(msg[1].Data), `"gate_id":"gate-c1"`) {
		t.Errorf("the gate's message: %+v", msg)
	}
	wantCode(t, "another tenant's task", call(t, srv, "other-tenant", "/a2a", "tasks/get", `{"id":"run-asks"}`), a2a.CodeTaskNotFound)
	wantCode(t, "a reply from another tenant", call(t, srv, "other-tenant", "/a2a", "message/send",
		`{"message":{"kind":"message","messageId":"m0","role":"user","taskId":"run-asks","parts":[{"kind":"text","text":"May"}]}}`),
		a2a.CodeTaskNotFound)

	reply := func(taskID, text string) rpcAnswer {
		return call(t, srv, tenant, "/a2a", "message/send", `{"message":{"kind":"message","messageId":"m1","role":"user","taskId":"`+taskID+
			`","parts":[{"kind":"text","text":"`+text+`"}]},"configuration":{"blocking":false}}`)
	}
	if a := reply("run-asks", "the last 30 days"); a.Result == nil || a.Result.Status.State != a2a.StateWorking {
		t.Fatalf("the answer: %+v %+v", a.Result, a.Error)
	}
	if rec, _, err := env.Gates.Get(ctx, tenant, "run-asks", "gate-c1"); err != nil || rec.Status != orch.GateApproved ||
		rec.Answer != "the last 30 days" || !strings.HasPrefix(rec.By, "a2a-") {
		t.Fatalf("the clarify gate: %+v (%v)", rec, err)
	}

	park("run-holds", orch.Gate{ID: "gate-a1", Kind: orch.GateApproval})
	unclear := reply("run-holds", "maybe later")
	wantCode(t, "a reply that does not decide", unclear, a2a.CodeInvalidParams)
	if unclear.Error != nil && !strings.Contains(unclear.Error.Message, `"approve" or "deny"`) {
		t.Errorf("the refusal does not say how to reply: %s", unclear.Error.Message)
	}
	if a := reply("run-holds", "Deny, not now"); a.Result == nil {
		t.Fatalf("the denial: %+v", a.Error)
	}
	if rec, _, err := env.Gates.Get(ctx, tenant, "run-holds", "gate-a1"); err != nil || rec.Status != orch.GateRejected || rec.Comment != "not now" {
		t.Fatalf("the approval gate: %+v (%v)", rec, err)
	}

	park("run-stops", orch.Gate{ID: "gate-a2", Kind: orch.GateApproval})
	wantCode(t, "a cancel from another tenant", call(t, srv, "other-tenant", "/a2a", "tasks/cancel", `{"id":"run-stops"}`), a2a.CodeTaskNotFound)
	if a := call(t, srv, tenant, "/a2a", "tasks/cancel", `{"id":"run-stops"}`); a.Result == nil || a.Result.Status.State != a2a.StateCanceled {
		t.Fatalf("tasks/cancel: %+v %+v", a.Result, a.Error)
	}
	if rec, _, err := env.Gates.Get(ctx, tenant, "run-stops", "gate-a2"); err != nil || rec.Status != orch.GateCancelled {
		t.Fatalf("the cancelled task's gate: %+v (%v)", rec, err)
	}
	wantCode(t, "a missing task", call(t, srv, tenant, "/a2a", "tasks/cancel", `{"id":"run-none"}`), a2a.CodeTaskNotFound)
	wantCode(t, "an unknown method", call(t, srv, tenant, "/a2a", "tasks/list", `{}`), a2a.CodeMethodNotFound)
	wantCode(t, "no params", call(t, srv, tenant, "/a2a", "tasks/get", `null`), a2a.CodeInvalidParams)
	wantCode(t, "a file part", call(t, srv, tenant, "/a2a", "message/send",
		`{"message":{"kind":"message","messageId":"m2","role":"user","parts":[{"kind":"file","file":{"uri":"x"}}]}}`), a2a.CodeContentTypeNotAllowed)
}

// TestAgentCards: the default router's card at /a2a and at the root, an
// active agent's at its base URL, each pointing at its JSON-RPC endpoint
// with the bearer scheme; a missing agent has no card, nor does another
// tenant's agent.
func TestAgentCards(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Adapters: []ingress.Adapter{a2a.Adapter{}}})
	tenant := handlerstest.Tenant
	id := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Support","description":"Answers customers.","system_prompt":"Help.","tools":["lookup_invoice"]}`).
		Want(t, "agent", http.StatusCreated).Str("agent_id")
	card := func(tenant, path string, status int) a2a.AgentCard {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("X-Tenant-Id", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c a2a.AgentCard
		if resp.StatusCode != status || (status == http.StatusOK && json.NewDecoder(resp.Body).Decode(&c) != nil) {
			t.Fatalf("GET %s: HTTP %d, want %d", path, resp.StatusCode, status)
		}
		return c
	}
	for _, path := range []string{"/.well-known/agent-card.json", "/a2a/.well-known/agent-card.json", "/a2a/.well-known/agent.json"} {
		if c := card(tenant, path, http.StatusOK); c.URL != srv.URL+"/a2a" || c.Name != "agentbus" || !c.Capabilities.Streaming ||
			c.SecuritySchemes["bearer"].Scheme != "bearer" || c.PreferredTransport != "JSONRPC" {
			t.Errorf("%s: %+v", path, c)
		}
	}
	c := card(tenant, "/a2a/agents/"+id+"/.well-known/agent-card.json", http.StatusOK)
	if c.URL != srv.URL+"/a2a/agents/"+id || c.Name != "Support" || len(c.Skills) != 1 || c.Skills[0].ID != id ||
		c.Skills[0].Description != "Answers customers." || !strings.Contains(strings.Join(c.Skills[0].Tags, ","), "lookup_invoice") {
		t.Errorf("the agent's card: %+v", c)
	}
	card(tenant, "/a2a/agents/nobody/.well-known/agent-card.json", http.StatusNotFound)
	card("other-tenant", "/a2a/agents/"+id+"/.well-known/agent-card.json", http.StatusNotFound)
}
