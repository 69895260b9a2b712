package tools_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/tools"
)

func newSystem(t *testing.T, e *env) (*tools.System, *runctl.Sessions) {
	t.Helper()
	kv, err := e.js.KeyValue(testCtx(t), handlers.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	sessions := &runctl.Sessions{KV: kv}
	return &tools.System{JS: e.js, Memory: e.st, Sessions: sessions}, sessions
}

func inSession(t *testing.T, run, session string) skills.CallInfo {
	t.Helper()
	return skills.CallInfo{RunID: run, SessionID: session, UserID: "user-1", CallID: "call-1"}
}

// TestSystemContext: set_context writes the session's memory; a later
// run of the same session reads it with get_context; another session or
// tenant does not see it.
func TestSystemContext(t *testing.T) {
	e := newEnv(t)
	sys, _ := newSystem(t, e)
	run1 := skills.WithCallInfo(testCtx(t), inSession(t, "run-1", "sess-1"))
	out, err := sys.Call(run1, "acme", agents.ToolSetContext, json.RawMessage(`{"key":"plan","value":{"tier":"gold","seats":3}}`), "k1")
	if err != nil || !strings.Contains(string(out), `"stored":true`) {
		t.Fatalf("set_context: %s, %v", out, err)
	}
	get := func(tenant, run, session, key string) map[string]any {
		t.Helper()
		ctx := skills.WithCallInfo(testCtx(t), inSession(t, run, session))
		out, err := sys.Call(ctx, tenant, agents.ToolGetContext, json.RawMessage(`{"key":"`+key+`"}`), "k2")
		if err != nil {
			t.Fatalf("get_context: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	later := get("acme", "run-2", "sess-1", "plan")
	if v, _ := later["value"].(map[string]any); later["found"] != true || v["tier"] != "gold" || v["seats"] != float64(3) {
		t.Fatalf("a later run of the session reads %v", later)
	}
	for _, c := range [][3]string{{"acme", "sess-2", "plan"}, {"globex", "sess-1", "plan"}, {"acme", "sess-1", "other"}} {
		if got := get(c[0], "run-3", c[1], c[2]); got["found"] != false || got["value"] != nil {
			t.Fatalf("%v reads %v", c, got)
		}
	}
	if _, err := sys.Call(run1, "acme", agents.ToolSetContext, json.RawMessage(`{"key":"Bad Key","value":1}`), "k3"); !errors.Is(err, skills.ErrInvalidArguments) {
		t.Fatalf("bad key: %v", err)
	}
	big := `{"key":"big","value":"` + strings.Repeat("x", agents.MaxContextValueLen) + `"}`
	if _, err := sys.Call(run1, "acme", agents.ToolSetContext, json.RawMessage(big), "k4"); !errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("big value: %v", err)
	}
	if _, err := sys.Call(testCtx(t), "acme", agents.ToolGetContext, json.RawMessage(`{"key":"plan"}`), "k5"); !errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("a call outside a session: %v", err)
	}
}

// TestSystemPublishes: send_message publishes the message on
// agent.outbound.<tenant> and trigger_flow the request on
// agent.flows.<tenant>, both on the AGENT stream; a retried call (same
// idempotency key) is published once.
func TestSystemPublishes(t *testing.T) {
	e := newEnv(t)
	sys, _ := newSystem(t, e)
	ctx := skills.WithCallInfo(testCtx(t), inSession(t, "run-1", "sess-1"))
	for range 2 { // the second is a redelivered hop's repeat
		if _, err := sys.Call(ctx, "acme", agents.ToolSendMessage, json.RawMessage(`{"text":"Your order shipped."}`), "run-1/1/t/0"); err != nil {
			t.Fatalf("send_message: %v", err)
		}
	}
	out, err := sys.Call(ctx, "acme", agents.ToolTriggerFlow, json.RawMessage(`{"flow_id":"refund","input":{"order":"42"}}`), "run-1/1/t/1")
	if err != nil || !strings.Contains(string(out), `"status":"requested"`) {
		t.Fatalf("trigger_flow: %s, %v", out, err)
	}
	stream, err := e.js.Stream(testCtx(t), events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	read := func(subject string, v any) uint64 {
		t.Helper()
		cons, err := stream.OrderedConsumer(testCtx(t), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for m := range batch.Messages() {
			n++
			if err := json.Unmarshal(m.Data(), v); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	var msg tools.OutboundMessage
	if n := read(tools.OutboundSubject("acme"), &msg); n != 1 || msg.Text != "Your order shipped." || msg.SessionID != "sess-1" ||
		msg.RunID != "run-1" || msg.TenantID != "acme" || msg.MessageID == "" {
		t.Fatalf("%d outbound messages, last %+v", n, msg)
	}
	var flow tools.FlowRequest
	if n := read(tools.FlowSubject("acme"), &flow); n != 1 || flow.FlowID != "refund" || !bytes.Contains(flow.Input, []byte(`"42"`)) ||
		flow.SessionID != "sess-1" {
		t.Fatalf("%d flow requests, last %+v", n, flow)
	}
	if n := read(tools.OutboundSubject("globex"), &msg); n != 0 {
		t.Fatalf("globex has %d outbound messages", n)
	}
}

// TestSystemEndConversation: end_conversation marks the session
// completed in the sessions bucket, and a run's later exchange keeps it.
func TestSystemEndConversation(t *testing.T) {
	e := newEnv(t)
	sys, sessions := newSystem(t, e)
	ctx := skills.WithCallInfo(testCtx(t), inSession(t, "run-1", "sess-9"))
	out, err := sys.Call(ctx, "acme", agents.ToolEndConversation, json.RawMessage(`{"resolution":"refunded"}`), "k")
	if err != nil || !strings.Contains(string(out), `"state":"completed"`) {
		t.Fatalf("end_conversation: %s, %v", out, err)
	}
	sess, _, err := sessions.Get(testCtx(t), "acme", "sess-9")
	if err != nil || sess.State != orch.SessionCompleted {
		t.Fatalf("session %+v, %v", sess, err)
	}
	// The run that ended it appends its exchange when it finishes: the
	// state stays completed, the exchange is kept.
	// The decider's change for the run's end says active, as for any run
	// its agent answered: the session the run completed stays completed.
	up, err := sessions.AppendChange(testCtx(t), orch.RunRequest{RunID: "run-1", TenantID: "acme", SessionID: "sess-9", Message: "refund me"},
		"Refunded.", time.Now(), false, &orch.SessionChange{Status: orch.SessionActive, AgentID: "agent-a", AgentTurn: true})
	if err != nil || up.Session.State != orch.SessionCompleted || len(up.Session.Messages) != 2 {
		t.Fatalf("appended %+v, %v", up.Session, err)
	}
	if _, _, err := sessions.Get(testCtx(t), "globex", "sess-9"); err == nil {
		t.Fatal("another tenant's session was written")
	}
}
