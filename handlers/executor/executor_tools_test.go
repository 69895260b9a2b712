package executor_test

import (
	"crypto/rand"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/egress/egresstest"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/tools"
)

// toolLayer is the executor's skills as the processes wire them: the demo
// Skill Service behind the system tools and env's webhook tools, whose
// calls trust the TLS server srv and dial through policy.
func toolLayer(t *testing.T, env *handlerstest.Env, srv *httptest.Server, policy *egress.Policy) (*tools.Layer, *tools.Secrets) {
	t.Helper()
	kv, err := env.JS.KeyValue(handlerstest.Ctx(t), handlers.BucketToolSecrets)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, tools.KeyLen)
	_, _ = rand.Read(key)
	secrets, err := tools.NewSecrets(kv, key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if srv != nil {
		roots.AddCert(srv.Certificate())
	}
	return &tools.Layer{Next: env.Skills, Defs: env.Store,
		System:   &tools.System{JS: env.JS, Memory: env.Store, Sessions: &runctl.Sessions{KV: env.Sessions}},
		Webhooks: &tools.Webhooks{Secrets: secrets, Egress: policy, RootCAs: roots, Log: handlerstest.NopLog}}, secrets
}

// putWebhookTool stores the tenant's webhook tool name at url, with its
// secret.
func putWebhookTool(t *testing.T, env *handlerstest.Env, secrets *tools.Secrets, id, name, url string, timeoutMS int) {
	t.Helper()
	now := time.Now().UTC()
	tool := agents.Tool{ToolID: id, TenantID: handlerstest.Tenant, Type: agents.ToolTypeCustom, Version: 1, CreatedAt: now, UpdatedAt: now,
		ToolSpec: agents.ToolSpec{Name: name, Description: "Look up an order.", Parameters: json.RawMessage(`{"type":"object"}`),
			Handler: agents.ToolHandler{URL: url, TimeoutMS: timeoutMS}}}
	tool.Normalize()
	d, err := tool.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.PutDefinition(handlerstest.Ctx(t), d, 0); err != nil {
		t.Fatal(err)
	}
	if err := secrets.Put(handlerstest.Ctx(t), handlerstest.Tenant, tool.ToolID, "a-webhook-secret-of-enough-bytes"); err != nil {
		t.Fatal(err)
	}
}

// endsInsufficient drives on a step whose hop gave outs, which must have
// iterated once: its next turn must end it insufficient.
func endsInsufficient(t *testing.T, x *executor.Executor, outs []event.Event) {
	t.Helper()
	next := handlerstest.OfType(outs, events.TypeStepIterated)
	if len(next) != 1 {
		t.Fatalf("outputs %v", handlerstest.Types(outs))
	}
	if sf := handlerstest.Finished(t, handlerstest.HandleStep(t, x, next[0])); sf.Result.Outcome != orch.OutcomeInsufficient {
		t.Fatalf("result %+v", sf.Result)
	}
}

// TestExecutorWebhookTimeoutFailsStep: a webhook tool that does not
// answer within its timeout_ms fails the step (skill_timeout), as the
// executor's own skill timeout does; the model is not asked again.
func TestExecutorWebhookTimeoutFailsStep(t *testing.T) {
	env := handlerstest.NewEnv(t)
	release := make(chan struct{})
	hung := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) }) // runs first
	layer, secrets := toolLayer(t, env, hung, egress.MustNew("127.0.0.1"))
	putWebhookTool(t, env, secrets, "tool-slow", "lookup_order", hung.URL+"/orders", 150)
	model := llmtest.Sequence(handlerstest.ToolCallResp("c1", "lookup_order", `{"order_id":"42"}`))
	x := executor.NewExecutor(model, layer, env.Store, env.Locks, env.Toolcalls, handlerstest.NopLog)
	handlerstest.UngateModes(t, env, x)
	req := handlerstest.ExecRequest("run-hook-timeout", 1)
	req.Run.Plan.Steps[0].Skills = []string{"lookup_order"}
	start := time.Now()
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-hook-timeout", events.TypeStepRequested, req))
	sf := handlerstest.Finished(t, outs)
	if sf.Result.Outcome != orch.OutcomeFailed || !strings.Contains(sf.Result.Reason, "skill_timeout") ||
		!strings.Contains(sf.Result.Reason, "150ms") || time.Since(start) > 2*time.Second {
		t.Fatalf("result %+v after %s", sf.Result, time.Since(start))
	}
	if _, ev := handlerstest.AuditOf(t, outs, "skill.timeout"); ev["skill_id"] != "lookup_order" {
		t.Fatalf("skill.timeout %v", ev)
	}
	if n := len(model.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times", n)
	}
}

// TestExecutorSendMessage: send_message is a network call, so with the
// default policy (no approval_gates entry) a step's call of it parks at a
// gate and nothing is sent; an agent whose definition auto-approves
// network calls, or a tenant whose policy gates no network call, calls it
// like any skill: the message is published on agent.outbound.<tenant>
// and the call is in the run's trace (skill.called); the model then
// answers.
func TestExecutorSendMessage(t *testing.T) {
	env := handlerstest.NewEnv(t)
	layer, _ := toolLayer(t, env, nil, nil)
	stream, err := env.JS.Stream(handlerstest.Ctx(t), events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	call := handlerstest.ToolCallResp("c1", agents.ToolSendMessage, `{"text":"Looking up your outlets now."}`)
	answer := handlerstest.TextResp(`{"status":"insufficient","reason":"the outlets are not known yet","suggestion":"list them first"}`)
	step := func(runID string, agent *orch.AgentDef, relax bool) (*executor.Executor, []event.Event) {
		x := executor.NewExecutor(llmtest.Sequence(call, answer), layer, env.Store, env.Locks, env.Toolcalls, handlerstest.NopLog)
		if relax {
			handlerstest.UngateModes(t, env, x)
		}
		req := handlerstest.ExecRequest(runID, 1)
		req.Run.Plan.Steps[0].Skills = []string{agents.ToolSendMessage}
		req.Run.Agent = agent
		return x, handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-"+runID, events.TypeStepRequested, req))
	}
	sent := func(runID string) bool {
		m, err := stream.GetLastMsgForSubject(handlerstest.Ctx(t), tools.OutboundSubject(handlerstest.Tenant))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		var msg tools.OutboundMessage
		if err := json.Unmarshal(m.Data, &msg); err != nil || msg.Text != "Looking up your outlets now." ||
			msg.SessionID != handlerstest.Session {
			t.Fatalf("outbound %s (%v)", m.Data, err)
		}
		return msg.RunID == runID
	}

	_, outs := step("run-send-gated", nil, false)
	if sf := handlerstest.Finished(t, outs); sf.Result.Outcome != orch.OutcomeAwaitingGate || sf.Result.Parked == nil ||
		sf.Result.Parked.Call.Skill != agents.ToolSendMessage || sf.Result.Parked.Call.Mode != "network" {
		t.Fatalf("default policy: result %+v", sf.Result)
	}
	if names := handlerstest.AuditNames(outs); !slices.Contains(names, "approval.required") || slices.Contains(names, "skill.called") {
		t.Fatalf("default policy: audit %v", names)
	}
	if sent("run-send-gated") {
		t.Fatal("default policy: the message was sent without an approval")
	}

	for _, c := range []struct {
		name  string
		agent *orch.AgentDef
		relax bool
	}{
		{"agent auto-approves network", &orch.AgentDef{ID: "concierge", Tools: []string{agents.ToolSendMessage}, AutoApprove: []string{"network"}}, false},
		{"tenant gates no network call", nil, true},
	} {
		runID := "run-send-" + strings.ReplaceAll(c.name, " ", "-")
		x, outs := step(runID, c.agent, c.relax)
		_, called := handlerstest.AuditOf(t, outs, "skill.called")
		if called["skill_id"] != agents.ToolSendMessage || called["is_error"] != false || called["approval_mode"] != "network" {
			t.Fatalf("%s: skill.called %v", c.name, called)
		}
		endsInsufficient(t, x, outs)
		if !sent(runID) {
			t.Fatalf("%s: no outbound message", c.name)
		}
	}
}

// TestExecutorWebhookEgressDenied: a webhook tool at a name that resolves
// to loopback is refused when it is dialled: the model sees an
// egress_denied tool error, the hop's trail has egress.denied, and the
// receiver accepts no connection. With the address allow-listed a call
// to it goes through.
func TestExecutorWebhookEgressDenied(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := egresstest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"status":"shipped"}`))
	}))
	layer, secrets := toolLayer(t, env, srv.Server, nil)
	putWebhookTool(t, env, secrets, "tool-internal", "lookup_order", "https://localhost:"+srv.Port()+"/orders", 2000)
	putWebhookTool(t, env, secrets, "tool-direct", "lookup_order_direct", srv.URL+"/orders", 2000)
	model := llmtest.Sequence(handlerstest.ToolCallResp("c1", "lookup_order", `{"order_id":"42"}`),
		handlerstest.TextResp(`{"status":"insufficient","reason":"the order service is out of reach","suggestion":"ask support"}`))
	x := executor.NewExecutor(model, layer, env.Store, env.Locks, env.Toolcalls, handlerstest.NopLog)
	handlerstest.UngateModes(t, env, x)
	req := handlerstest.ExecRequest("run-egress", 1)
	req.Run.Plan.Steps[0].Skills = []string{"lookup_order"}
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-egress", events.TypeStepRequested, req))
	_, denied := handlerstest.AuditOf(t, outs, "egress.denied")
	if denied["code"] != egress.Code || denied["host"] != "localhost" || denied["range"] != "loopback" || denied["skill_id"] != "lookup_order" {
		t.Fatalf("egress.denied %v", denied)
	}
	if _, called := handlerstest.AuditOf(t, outs, "skill.called"); called["is_error"] != true {
		t.Fatalf("skill.called %v", called)
	}
	endsInsufficient(t, x, outs)
	reqs := model.Requests()
	if last := reqs[len(reqs)-1].Messages; !strings.Contains(last[len(last)-1].Content, "egress_denied") {
		t.Fatalf("the model saw %+v", last[len(last)-1])
	}
	if n := srv.Accepted(); n != 0 {
		t.Fatalf("%d connections reached the refused address", n)
	}

	allowed, _ := toolLayer(t, env, srv.Server, egress.MustNew("127.0.0.0/8"))
	allowed.Webhooks.Secrets = secrets
	model = llmtest.Sequence(handlerstest.ToolCallResp("c1", "lookup_order_direct", `{"order_id":"42"}`))
	x = executor.NewExecutor(model, allowed, env.Store, env.Locks, env.Toolcalls, handlerstest.NopLog)
	handlerstest.UngateModes(t, env, x)
	req = handlerstest.ExecRequest("run-egress-allowed", 1)
	req.Run.Plan.Steps[0].Skills = []string{"lookup_order_direct"}
	outs = handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-egress-allowed", events.TypeStepRequested, req))
	if slices.Contains(handlerstest.AuditNames(outs), "egress.denied") {
		t.Fatal("the allow-listed call was refused")
	}
	if _, called := handlerstest.AuditOf(t, outs, "skill.called"); called["is_error"] != false || srv.Accepted() != 1 {
		t.Fatalf("skill.called %v, %d connections", called, srv.Accepted())
	}
}
