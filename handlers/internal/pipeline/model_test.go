package pipeline

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills/demo"
)

// pricedOffline is the offline model metered with a non-zero price, so
// costs add up to something.
func pricedOffline() llm.Model {
	return llm.Metered{Model: offline.New(), Prices: llm.Prices{"offline": {Input: 2, CachedInput: 1, Output: 8}}}
}

// scriptedThenOffline answers with replies first, then as the offline model.
func scriptedThenOffline(replies ...llmtest.Reply) *llmtest.Scripted {
	m := llmtest.New().Then(replies...)
	m.Default = pricedOffline()
	return m
}

func runEvent(t *testing.T, runID string, stream bool) event.Event {
	t.Helper()
	req := handlerstest.RunRequest(runID, handlerstest.RankTask)
	req.Stream = stream
	ev, err := events.New(runID, events.TypeRunRequested, events.Meta{Tenant: handlerstest.Tenant, Session: handlerstest.Session, Run: runID}, req)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func modelCalls(t *testing.T, seen []event.Event) []llm.Call {
	t.Helper()
	var calls []llm.Call
	for _, ev := range handlerstest.OfType(seen, events.AuditType("model.called")) {
		a := handlerstest.Decode[events.Audit](t, ev)
		var c llm.Call
		if err := json.Unmarshal(a.Payload, &c); err != nil {
			t.Fatalf("model.called payload: %v", err)
		}
		calls = append(calls, c)
	}
	return calls
}

// TestUsage_RunTotalsEqualTheModelCalls: every model call of a run (route,
// plan, each executor turn, synthesis) is one model.called event with its
// task, prompt version, model, tokens and cost, and the run's totals in
// run.finished and in the plan projection are their sum.
func TestUsage_RunTotalsEqualTheModelCalls(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	m := pricedOffline()
	f.router.Model, f.planner.Model, f.exec.Model = m, m, m
	res, seen := f.drive(t, runEvent(t, "run-usage", false))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	calls := modelCalls(t, seen)
	tasks := map[llm.Task]int{}
	var sum llm.Usage
	for _, c := range calls {
		tasks[c.Task]++
		sum = sum.Add(c.Usage())
		if c.Model != "offline" || c.Provider != "offline" || c.PromptVersion != llm.SystemPrompt(c.Task).Version || c.InputTokens == 0 || c.CostUSD <= 0 {
			t.Errorf("model.called = %+v: want the model, provider, prompt version, tokens and cost", c)
		}
	}
	// Route, plan, two turns for each of the two steps, synthesis.
	if tasks[llm.TaskRoute] != 1 || tasks[llm.TaskPlan] != 1 || tasks[llm.TaskAct] != 4 || tasks[llm.TaskSynthesize] != 1 {
		t.Errorf("model calls by task = %v", tasks)
	}
	if res.Usage.Calls != len(calls) || res.Usage.InputTokens != sum.InputTokens || res.Usage.OutputTokens != sum.OutputTokens ||
		math.Abs(res.Usage.CostUSD-sum.CostUSD) > 1e-12 {
		t.Fatalf("run totals %+v, want the sum of its %d model.called events %+v", res.Usage, len(calls), sum)
	}
	p, _, err := env.Store.GetPlan(handlerstest.Ctx(t), res.TenantID, res.PlanID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Usage != res.Usage {
		t.Errorf("plan projection usage %+v, want %+v", p.Usage, res.Usage)
	}
}

// TestValidation_InvalidPlanRepairedOnTheSecondTurn: a plan naming a skill
// that was never loaded goes back to the model with the verification
// error, and the corrected plan runs to SUCCESS.
func TestValidation_InvalidPlanRepairedOnTheSecondTurn(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	planner := scriptedThenOffline(llmtest.Text(`{"steps":[{"step":1,"task":"t","skills":["launch_rocket"],"return_spec":{"shape":{"type":"object"}}}]}`))
	f.planner.Model = planner
	res, _ := f.drive(t, runEvent(t, "run-repair", false))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	reqs := planner.Requests(llm.TaskPlan)
	if len(reqs) != 2 || !strings.Contains(handlerstest.LastMessage(reqs[1]), `unknown skill "launch_rocket"`) {
		t.Fatalf("planner asked %d times; the second ask must quote the error: %q", len(reqs), handlerstest.LastMessage(reqs[len(reqs)-1]))
	}
}

// TestValidation_ThirdInvalidPlanEndsValidationFail: a model that keeps
// answering an invalid plan is asked 1 + MaxRepairs times, then the run
// ends VALIDATION_FAIL without a redelivery.
func TestValidation_ThirdInvalidPlanEndsValidationFail(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	planner := handlerstest.Repeating(handlerstest.TextResp(`{"steps":"not a list"}`))
	f.planner.Model = planner
	res, _ := f.drive(t, runEvent(t, "run-invalid-plan", false))
	if res.TerminalCode != orch.CodeValidationFail || len(planner.Requests()) != 1+llm.MaxRepairs {
		t.Fatalf("run ended %s after %d plan requests: %s", res.TerminalCode, len(planner.Requests()), res.Response)
	}
}

// TestValidation_ToolArgumentsOffTheInputSchemaNeverReachTheTool: tool
// calls whose arguments violate the skill's inputSchema are answered with
// the validation error instead of being made; the third in a row ends the
// run VALIDATION_FAIL, and the skill never ran.
func TestValidation_ToolArgumentsOffTheInputSchemaNeverReachTheTool(t *testing.T) {
	wholeRun(t)
	bad := llmtest.ToolCall("c1", demo.SkillOutletList, `{"status":"open"}`) // not in the enum
	t.Run("three invalid calls", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		f := newFlow(t, env, env.Store)
		f.exec.Model = scriptedThenOffline(bad, bad, bad)
		res, seen := f.drive(t, runEvent(t, "run-bad-args", false))
		if res.TerminalCode != orch.CodeValidationFail || !strings.Contains(res.Reason, "stayed invalid") {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
			t.Fatalf("outlet_list ran %d times with invalid arguments", n)
		}
		if n := len(handlerstest.OfType(seen, events.AuditType("skill.arguments_invalid"))); n != 1+llm.MaxRepairs {
			t.Errorf("%d skill.arguments_invalid events, want %d", n, 1+llm.MaxRepairs)
		}
	})
	t.Run("repaired on the next turn", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		f := newFlow(t, env, env.Store)
		exec := scriptedThenOffline(bad)
		f.exec.Model = exec
		res, _ := f.drive(t, runEvent(t, "run-fixed-args", false))
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
			t.Fatalf("outlet_list ran %d times, want once (the repaired call)", n)
		}
		reqs := exec.Requests(llm.TaskAct)
		if !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].Content, "invalid arguments for outlet_list") {
			t.Errorf("the model was not told why its call was refused: %+v", reqs[1].Messages)
		}
	})
}

// TestUnavailable_ProviderDownEndsTheRunUnavailableDep: whichever role's
// model is unavailable after its retries, the run ends UNAVAILABLE_DEP (not
// ten redeliveries); with the offline fallback the same run succeeds.
func TestUnavailable_ProviderDownEndsTheRunUnavailableDep(t *testing.T) {
	wholeRun(t)
	down := func() llm.Model {
		m := llmtest.New().Then(llmtest.Fail(fmt.Errorf("openai: test-model: %w: 500 Internal Server Error", llm.ErrUnavailable)))
		m.Repeat = true
		return m
	}
	roles := map[string]func(f *flow, m llm.Model){
		"router":      func(f *flow, m llm.Model) { f.router.Model = m },
		"planner":     func(f *flow, m llm.Model) { f.planner.Model = m },
		"executor":    func(f *flow, m llm.Model) { f.exec.Model = m },
		"synthesiser": func(f *flow, m llm.Model) { f.router.Synthesiser = m },
	}
	for role, set := range roles {
		t.Run(role, func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			f := newFlow(t, env, env.Store)
			set(f, down())
			res, seen := f.drive(t, runEvent(t, "run-down-"+role, false))
			if res.TerminalCode != orch.CodeUnavailableDep || !strings.Contains(res.Reason, "unavailable") {
				t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
			}
			failed := 0
			for _, c := range modelCalls(t, seen) {
				if c.Error != "" {
					failed++
				}
			}
			if failed != 1 {
				t.Errorf("%d failed model calls in the trace, want 1", failed)
			}
		})
		t.Run(role+" with fallback", func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			f := newFlow(t, env, env.Store)
			set(f, llm.Fallback{Primary: down(), Secondary: pricedOffline()})
			res, seen := f.drive(t, runEvent(t, "run-fallback-"+role, false))
			if res.TerminalCode != orch.CodeSuccess {
				t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
			}
			fell := 0
			for _, c := range modelCalls(t, seen) {
				if c.FallbackReason != "" {
					fell++
				}
			}
			if fell == 0 {
				t.Errorf("no model.called event records the fallback")
			}
		})
	}
}

// TestStreaming_AnswerChunksOnTheReplyStream: a run that asked to stream
// gets its answer as chunks of one message on reply.<tenant>.<session>,
// in order, adding up to the final response, the last one ending the
// message.
func TestStreaming_AnswerChunksOnTheReplyStream(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	f.router.Replies = &handlers.Replies{JS: env.JS}
	res, _ := f.drive(t, runEvent(t, "run-stream", true))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s", res.TerminalCode)
	}
	ctx := handlerstest.Ctx(t)
	c, err := env.JS.OrderedConsumer(ctx, events.StreamReply, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.ReplySubject(handlerstest.Tenant, handlerstest.Session)}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var chunks []runclient.Chunk
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(500 * time.Millisecond))
		if err != nil {
			break
		}
		ev, err := events.FromMsg(msg.Headers(), msg.Data())
		if err != nil || ev.Type() != events.TypeReplyChunk || events.MetaOf(ev).Run != "run-stream" {
			t.Fatalf("reply message %v: %v", ev.Type(), err)
		}
		ch := handlerstest.Decode[runclient.Chunk](t, ev)
		chunks = append(chunks, ch)
		text.WriteString(ch.Content)
	}
	if len(chunks) < 3 || !chunks[len(chunks)-1].EndOfMessage || text.String() != res.Response {
		t.Fatalf("%d chunks add up to %q, want %q ending the message", len(chunks), text.String(), res.Response)
	}
	for _, ch := range chunks {
		if ch.MessageID != chunks[0].MessageID || ch.MessageType != "answer" || ch.SessionID != handlerstest.Session || ch.EndOfDialog {
			t.Fatalf("chunk %+v is not part of one answer message", ch)
		}
	}
}
