package executor_test

import (
	"net/http"
	"slices"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/egress/egresstest"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/tools"
)

// calls is one model answer making every call in order.
func calls(cs ...llm.ToolCall) llm.Response {
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: cs}}
}

// TestExecutorTaint_AnOpenWorldResultGatesTheSideEffectsAfterIt: in one
// model turn a webhook tool (open world: its answer is a remote party's)
// is called, then send_message: the send waits at a gate (guard.taint,
// approval.required), nothing is published, and the parked step carries
// its taint. A step whose only open-world tool is agentbus's own
// send_message is not tainted by its result: its next side effect runs.
func TestExecutorTaint_AnOpenWorldResultGatesTheSideEffectsAfterIt(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := egresstest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"status":"shipped"}`))
	}))
	layer, secrets := toolLayer(t, env, srv.Server, egress.MustNew("127.0.0.0/8"))
	putWebhookTool(t, env, secrets, "tool-orders", "lookup_order", srv.URL+"/orders", 2000)
	send := llm.ToolCall{ID: "c2", Name: agents.ToolSendMessage, Arguments: json.RawMessage(`{"text":"your order shipped"}`)}
	model := llmtest.Sequence(calls(llm.ToolCall{ID: "c1", Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"42"}`)}, send))
	x := executor.NewExecutor(model, layer, env.Store, env.Locks, env.Toolcalls, handlerstest.NopLog)
	handlerstest.UngateModes(t, env, x) // network calls run inline: only the taint rule gates here
	req := handlerstest.ExecRequest("run-taint", 1)
	req.Run.Plan.Steps[0].Skills = []string{"lookup_order", agents.ToolSendMessage}
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-taint", events.TypeStepRequested, req))
	sf := handlerstest.Finished(t, outs)
	if sf.Result.Outcome != orch.OutcomeAwaitingGate || sf.Result.Parked == nil || sf.Result.Parked.Call.Skill != agents.ToolSendMessage ||
		sf.Result.Parked.Tainted != "lookup_order" {
		t.Fatalf("result %+v", sf.Result)
	}
	if _, ev := handlerstest.AuditOf(t, outs, "guard.taint"); ev["tainted_by"] != "lookup_order" || ev["skill_id"] != agents.ToolSendMessage ||
		ev["policy"] != "gate" {
		t.Fatalf("guard.taint %v", ev)
	}
	if _, ev := handlerstest.AuditOf(t, outs, "approval.required"); ev["action"] != agents.ToolSendMessage || ev["risk"] != "network" {
		t.Fatalf("approval.required %v", ev)
	}
	if srv.Accepted() != 1 || outbound(t, env) != 0 {
		t.Fatalf("%d webhook calls, %d messages sent", srv.Accepted(), outbound(t, env))
	}

	model = llmtest.Sequence(calls(send, llm.ToolCall{ID: "c3", Name: agents.ToolSetContext,
		Arguments: json.RawMessage(`{"key":"notified","value":true}`)}))
	x = executor.NewExecutor(model, layer, env.Store, env.Locks, env.Toolcalls, handlerstest.NopLog)
	handlerstest.UngateModes(t, env, x)
	req = handlerstest.ExecRequest("run-untainted", 1)
	req.Run.Plan.Steps[0].Skills = []string{agents.ToolSendMessage, agents.ToolSetContext}
	outs = handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-untainted", events.TypeStepRequested, req))
	next := handlerstest.OfType(outs, events.TypeStepIterated)
	if len(next) != 1 || slices.Contains(handlerstest.AuditNames(outs), "guard.taint") {
		t.Fatalf("outputs %v, trail %v", handlerstest.Types(outs), handlerstest.AuditNames(outs))
	}
	if sr := handlerstest.Decode[orch.StepRequest](t, next[0]); sr.Tainted != "" || sr.Tools[agents.ToolSetContext].Calls != 1 {
		t.Fatalf("next turn tainted %q, tools %v", sr.Tainted, sr.Tools)
	}
	if outbound(t, env) != 1 {
		t.Fatalf("%d messages sent, want 1", outbound(t, env))
	}
}

// outbound counts the messages send_message published for the tenant.
func outbound(t *testing.T, env *handlerstest.Env) int {
	t.Helper()
	stream, err := env.JS.Stream(handlerstest.Ctx(t), events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(handlerstest.Ctx(t), jetstream.WithSubjectFilter(tools.OutboundSubject(handlerstest.Tenant)))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects[tools.OutboundSubject(handlerstest.Tenant)])
}
