package pipeline

import (
	"slices"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/tools"
)

// sent returns the messages published for the test tenant's channel
// conversations (tools.OutboundSubject), in order.
func sent(t *testing.T, env *handlerstest.Env) []tools.OutboundMessage {
	t.Helper()
	ctx := handlerstest.Ctx(t)
	c, err := env.JS.OrderedConsumer(ctx, events.StreamAgent, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{tools.OutboundSubject(handlerstest.Tenant)}})
	if err != nil {
		t.Fatal(err)
	}
	var out []tools.OutboundMessage
	for {
		msgs, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range msgs.Messages() {
			var o tools.OutboundMessage
			if err := json.Unmarshal(m.Data(), &o); err != nil {
				t.Fatalf("outbound message %s: %v", m.Data(), err)
			}
			out = append(out, o)
			n++
		}
		if n == 0 {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A run a trigger started (a channel conversation) says what it has to
// say through send_message (seed 002's flow step 9): the question of its
// clarify gate, then, answered, its answer; each sent once, recorded in
// its trace. A run requested through the API answers its caller only.
func TestChannel_ATriggeredRunSendsItsQuestionAndAnswerToTheConversation(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	asks := llmtest.Text(`{"task_type":"general","pattern":"react","reason":"two readings","clarify":"Which outlets: the active ones or all of them?"}`)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, asks, routeTo("general", router.PatternPlanThenExecute), routeTo("general", router.PatternPlanThenExecute))
	f := patternFlow(t, env, model)
	f.router.Outbound = &tools.System{JS: env.JS}

	req := handlerstest.RunRequest("run-chan", "Rank the outlets")
	req.TriggerID = "trg-chat"
	p := f.pump(t, handlerstest.NewEvent(t, "run-chan", events.TypeRunRequested, req))
	if len(p.parked) != 1 {
		t.Fatalf("parked %+v, finished %+v", p.parked, p.finished)
	}
	msgs := sent(t, env)
	if len(msgs) != 1 || msgs[0].Text != "Which outlets: the active ones or all of them?" || msgs[0].RunID != "run-chan" ||
		msgs[0].SessionID != handlerstest.Session {
		t.Fatalf("sent %+v, want the gate's question", msgs)
	}
	after := f.decide(t, env, p.parked[0], orch.ApprovalDecided{Decision: orch.GateApproved, By: "ada", Answer: "the active ones"})
	if len(after.finished) != 1 || after.finished[0].TerminalCode != orch.CodeSuccess {
		t.Fatalf("answered: %+v", after.finished)
	}
	msgs = sent(t, env)
	if len(msgs) != 2 || msgs[1].Text != after.finished[0].Response || msgs[1].MessageID == msgs[0].MessageID {
		t.Fatalf("sent %+v, want the question then the answer %q", msgs, after.finished[0].Response)
	}
	names := traceNames(after.seen)
	if i, j := slices.Index(names, router.AuditAnswerSent), slices.Index(names, "run.finished"); i < 0 || j < i {
		t.Fatalf("trace %v: want message.sent before run.finished", names)
	}
	// The final hop handled again sends nothing twice.
	last := after.seen[len(after.seen)-1]
	for _, ev := range after.seen {
		if ev.Type() == events.TypeStepJoined || ev.Type() == events.TypeGroupJoined {
			last = ev
		}
	}
	if _, err := f.route(handlerstest.Ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if n := len(sent(t, env)); n != 2 {
		t.Fatalf("a redelivered hop sent again: %d messages", n)
	}

	// Requested through the API: nothing goes to a conversation.
	res, _ := f.drive(t, runStart(t, "run-api", "Rank the outlets"))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("API run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if n := len(sent(t, env)); n != 2 {
		t.Fatalf("an API run sent %d messages to a conversation", n-2)
	}
}
