package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// Every terminal code of seed 003 that a run can end with today, each
// reached by a whole run through the real role handlers, the real NATS
// JetStream buckets and the real demo Skill Service over MCP; only the
// model is scripted. Each subtest asserts the code, its reason and the
// trace's evidence of why the run stopped.

func TestTerminalCodes(t *testing.T) {
	wholeRun(t)
	covered := map[string]bool{}
	run := func(code string, body func(t *testing.T)) {
		covered[code] = true
		t.Run(code, body)
	}

	run(orch.CodeSuccess, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		res, seen := newFlow(t, env, env.Store).drive(t, runStart(t, "run-tc-success", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeSuccess, "")
		if res.Status != orch.PlanComplete || !strings.Contains(res.Response, "out-") {
			t.Errorf("status %s, response %q: want the ranked outlets", res.Status, res.Response)
		}
	})

	run(orch.CodePartialSuccess, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := routedTo("risk-assessment", router.PatternSupervisor)
		model.On(llm.TaskSupervise, llmtest.JSON(llm.SuperviseOutput{Lanes: []llm.LaneGoal{
			{Goal: "List the active outlets", Skills: []string{demo.SkillOutletList}},
			{Goal: "List the inactive outlets", Skills: []string{demo.SkillOutletList}},
		}}))
		f := patternFlow(t, env, model)
		// Lane 2 is slow: its step is delivered only after the run ended,
		// so the group's deadline passes with lane 1 alone finished.
		res, seen := driveStepwise(t, f, runStart(t, "run-tc-partial", handlerstest.RankTask), stepwise{
			hold: func(ev event.Event) bool {
				return ev.Type() == events.TypeStepRequested && handlerstest.Decode[orch.StepRequest](t, ev).Step == 2
			},
		})
		assertEnded(t, res, seen, orch.CodePartialSuccess, "the deadline passed before step 2 (List the inactive outlets)")
		if !strings.Contains(res.Response, "Harbour Front (out-001)") || strings.Contains(res.Response, "Old Town Square") {
			t.Errorf("the answer is not lane 1's active outlets alone:\n%s", res.Response)
		}
		if cut := handlerstest.AuditPayloads(t, seen, "fanin.deadline"); len(cut) != 1 || cut[0]["finished"] != 1.0 {
			t.Errorf("fanin.deadline audits %v, want one with 1 finished lane", cut)
		}
		// The late lane ran after the run ended and joined nothing.
		if n := len(handlerstest.OfType(seen, events.TypeStepFinished)); n != 2 {
			t.Errorf("%d step.finished, want both lanes'", n)
		}
		if n := len(handlerstest.OfType(seen, events.TypeGroupJoined)); n != 1 {
			t.Errorf("%d group.joined, want the deadline's one", n)
		}
	})

	run(orch.CodeImpossible, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := routedTo("general", router.PatternPlanThenExecute)
		model.On(llm.TaskPlan, llmtest.Text(`{"infeasible":"no skill reports the weather"}`))
		res, seen := patternFlow(t, env, model).drive(t, runStart(t, "run-tc-impossible", "What is the weather at each outlet?"))
		assertEnded(t, res, seen, orch.CodeImpossible, "plan infeasible: no skill reports the weather")
		if n := len(handlerstest.OfType(seen, events.TypeStepRequested)); n != 0 {
			t.Errorf("an infeasible plan dispatched %d steps", n)
		}
	})

	run(orch.CodeMissingInfo, func(t *testing.T) {
		// The executor reports every attempt insufficient, naming what is
		// missing; no revision supplies it.
		insufficient := llmtest.JSON(map[string]any{"status": "insufficient", "reason": "needs a date range",
			"suggestion": "ask the user for the dates"})
		t.Run("each revision reworded", func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			model := routedTo("general", router.PatternPlanThenExecute)
			model.Repeat = true
			for i, task := range []string{"List the active outlets", "List the outlets active this month",
				"List the outlets active in the reporting period", "List the outlets active in the last 30 days"} {
				model.On(llm.TaskPlan, llmtest.Text(fmt.Sprintf(`{"steps":[{"step":%d,"task":%q,"skills":[%q],"return_spec":{"shape":%s}}]}`,
					i+1, task, demo.SkillOutletList, handlerstest.OutletIDsShape)))
			}
			model.On(llm.TaskAct, insufficient)
			res, seen := patternFlow(t, env, model).drive(t, runStart(t, "run-tc-missing", "List the active outlets"))
			assertEnded(t, res, seen, orch.CodeMissingInfo, "no replan could supply: needs a date range")
			if n := len(handlerstest.AuditPayloads(t, seen, "replan.triggered")); n != orch.MaxReplans {
				t.Errorf("%d replans before the handback, want %d", n, orch.MaxReplans)
			}
		})
		t.Run("the same revision", func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			model := routedTo("general", router.PatternPlanThenExecute)
			model.Repeat = true
			model.On(llm.TaskAct, insufficient)
			res, seen := patternFlow(t, env, model).drive(t, runStart(t, "run-tc-missing-same", "List the active outlets"))
			// A revision identical to the step that lacked the information
			// cannot supply it: the second report hands back at once.
			assertEnded(t, res, seen, orch.CodeMissingInfo, "needs a date range")
			if n := len(handlerstest.AuditPayloads(t, seen, "replan.triggered")); n != 1 {
				t.Errorf("%d replans before the handback, want 1", n)
			}
		})
	})

	run(orch.CodeAmbiguousIntent, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := llmtest.New()
		model.Default = offline.New()
		model.On(llm.TaskRoute, llmtest.Text(`{"task_type":"general","pattern":"react","reason":"two readings",`+
			`"clarify":"Which outlets: the active ones or all of them?"}`))
		res, seen := patternFlow(t, env, model).drive(t, runStart(t, "run-tc-ambiguous", "Rank the outlets"))
		assertEnded(t, res, seen, orch.CodeAmbiguousIntent, "the active ones or all of them")
		if q := handlerstest.AuditPayloads(t, seen, "clarification.requested"); len(q) != 1 {
			t.Errorf("clarification.requested audits %v, want 1", q)
		}
		if n := len(handlerstest.OfType(seen, events.TypePlanRequested)); n != 0 {
			t.Errorf("an ambiguous task was planned (%d plan.requested)", n)
		}
	})

	run(orch.CodeConfirmRequired, func(t *testing.T) {
		destructive := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true)}
		env := handlerstest.NewEnvWith(t, demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: destructive}})
		f := patternFlow(t, env, loopCalling(t, `{"status":"inactive"}`))
		res, seen := f.drive(t, runStart(t, "run-tc-confirm", handlerstest.RankTask))
		// Nobody decides the gate the destructive call waits at: it expires.
		assertEnded(t, res, seen, orch.CodeConfirmRequired, "before it expired")
		if res.Status != orch.PlanExpired || !slices.Contains(traceNames(seen), "gate.expired") {
			t.Errorf("status %s, trace %v: want the gate expired", res.Status, traceNames(seen))
		}
		if a := handlerstest.AuditPayloads(t, seen, "approval.required"); len(a) != 1 || a[0]["action"] != demo.SkillOutletList || a[0]["risk"] != "destructive" {
			t.Errorf("approval.required audits %v", a)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
			t.Errorf("the destructive skill ran %d times without an approval", n)
		}
	})

	run(orch.CodeReviewRequired, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		putPolicy(t, env, `{"defaults":{"tool_calls":1},"escalation":{"target":"ops-review","on":["BUDGET_EXHAUSTED"]}}`)
		f := patternFlow(t, env, loopCalling(t, `{"status":"active"}`, `{"status":"inactive"}`))
		res, seen := f.drive(t, runStart(t, "run-tc-review", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeReviewRequired, "tool_calls")
		if !strings.Contains(res.Response, "needs review (ops-review)") {
			t.Errorf("response %q does not name the review target", res.Response)
		}
		esc := handlerstest.AuditPayloads(t, seen, "escalation.raised")
		if len(esc) != 1 || esc[0]["target"] != "ops-review" || esc[0]["code"] != orch.CodeBudgetExhausted {
			t.Errorf("escalation.raised audits %v, want one for ops-review of BUDGET_EXHAUSTED", esc)
		}
	})

	run(orch.CodeBudgetExhausted, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		putPolicy(t, env, `{"defaults":{"tool_calls":1}}`)
		f := patternFlow(t, env, loopCalling(t, `{"status":"active"}`, `{"status":"inactive"}`))
		res, seen := f.drive(t, runStart(t, "run-tc-budget", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeBudgetExhausted, "tool_calls would reach 2 of its limit 1")
		if ex := handlerstest.AuditPayloads(t, seen, "budget.exhausted"); len(ex) != 1 || ex[0]["dimension"] != string(orch.DimToolCalls) {
			t.Errorf("budget.exhausted audits %v, want one of tool_calls", ex)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
			t.Errorf("the skill ran %d times with a budget of 1 call", n)
		}
	})

	run(orch.CodeTimeout, func(t *testing.T) {
		// Each call takes 0.7 s: the third turn comes after the run's 1 s.
		env := handlerstest.NewEnvWith(t, demo.Config{Latency: 700 * time.Millisecond})
		putPolicy(t, env, `{"defaults":{"wall_clock_s":1}}`)
		f := patternFlow(t, env, loopCalling(t, `{"status":"active"}`, `{"status":"inactive"}`, `{}`))
		start := time.Now()
		res, seen := f.drive(t, runStart(t, "run-tc-timeout", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeTimeout, "wall clock of 1s ran out")
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("a 1 s run took %s to stop", took)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 2 {
			t.Errorf("the skill ran %d times, want the 2 calls made before the deadline", n)
		}
	})

	run(orch.CodeValidationFail, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := routedTo("research", router.PatternReact)
		model.Repeat = true
		model.On(llm.TaskAct, llmtest.Text("I think the outlets are fine."))
		res, seen := patternFlow(t, env, model).drive(t, runStart(t, "run-tc-invalid", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeValidationFail, fmt.Sprintf("stayed invalid after %d repairs", llm.MaxRepairs))
		if n := len(handlerstest.AuditPayloads(t, seen, "output.repair_requested")); n != llm.MaxRepairs {
			t.Errorf("%d repair turns, want %d", n, llm.MaxRepairs)
		}
	})

	run(orch.CodeRepeatedFailure, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		same := `{"status":"active"}`
		f := patternFlow(t, env, loopCalling(t, same, same, same, same))
		res, seen := f.drive(t, runStart(t, "run-tc-repeat", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeRepeatedFailure, "loop guard: outlet_list was called 4 times with the same arguments")
		if g := handlerstest.AuditPayloads(t, seen, "guard.repeated_call"); len(g) != 1 || g[0]["skill_id"] != demo.SkillOutletList {
			t.Errorf("guard.repeated_call audits %v", g)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != executor.DefaultRepeatCallLimit {
			t.Errorf("the skill ran %d times, want the %d allowed", n, executor.DefaultRepeatCallLimit)
		}
	})

	run(orch.CodePermissionDenied, func(t *testing.T) {
		env := handlerstest.NewEnvWith(t, demo.Config{DenySkills: []string{demo.SkillOutletList}})
		f := patternFlow(t, env, loopCalling(t, `{"status":"active"}`))
		res, seen := f.drive(t, runStart(t, "run-tc-denied", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodePermissionDenied, "permission denied by the Skill Service: outlet_list")
		if r := handlerstest.AuditPayloads(t, seen, "skill.refused"); len(r) != 1 || r[0]["skill_id"] != demo.SkillOutletList {
			t.Errorf("skill.refused audits %v", r)
		}
		if inv := env.Demo.Invocations(); len(inv) != 0 {
			t.Errorf("a refused skill executed: %v", inv)
		}
	})

	run(orch.CodeUnsafeDetection, func(t *testing.T) {
		const secret = "sk-test-secret-123456"
		env := handlerstest.NewEnv(t)
		f := patternFlow(t, env, loopCalling(t, `{"status":"active","api_key":"`+secret+`"}`))
		f.exec.Secrets = []string{secret}
		res, seen := f.drive(t, runStart(t, "run-tc-unsafe", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeUnsafeDetection, "the arguments of a outlet_list call carry a credential of the run")
		if g := handlerstest.AuditPayloads(t, seen, "guard.unsafe"); len(g) != 1 || g[0]["guard"] != "secret_in_arguments" {
			t.Errorf("guard.unsafe audits %v", g)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
			t.Errorf("the skill ran %d times with a secret in its arguments", n)
		}
		for _, ev := range seen {
			if strings.Contains(string(ev.Data()), secret) {
				t.Errorf("the secret reached a %s event", ev.Type())
			}
		}
	})

	run(orch.CodeUnavailableDep, func(t *testing.T) {
		// outlet_list's first call fails; one failure opens its circuit,
		// so the loop's next call fails fast.
		env := handlerstest.NewEnvWith(t, demo.Config{FailFirst: map[string]int{demo.SkillOutletList: 1}})
		f := patternFlow(t, env, loopCalling(t, `{"status":"active"}`, `{"status":"inactive"}`))
		f.exec.Breakers = &ledger.Breakers{Failures: 1}
		res, seen := f.drive(t, runStart(t, "run-tc-unavailable", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeUnavailableDep, "circuit open: "+handlerstest.Tenant+"/"+demo.SkillOutletList)
		if r := handlerstest.AuditPayloads(t, seen, "circuit.refused"); len(r) != 1 || r[0]["skill_id"] != demo.SkillOutletList {
			t.Errorf("circuit.refused audits %v", r)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
			t.Errorf("the skill ran %d times; the call after its circuit opened must fail fast", n)
		}
	})

	run(orch.CodeUserCancel, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := loopCalling(t, `{"status":"active"}`)
		f := patternFlow(t, env, model)
		f.router.Cancels = handlerstest.StartCancels(t, env)
		f.exec.Cancels = f.router.Cancels
		// The user cancels once the step is dispatched, before the
		// executor takes it.
		res, seen := driveStepwise(t, f, runStart(t, "run-tc-cancel", handlerstest.RankTask), stepwise{
			before: func(ev event.Event) {
				if ev.Type() == events.TypeStepRequested {
					handlerstest.CancelRun(t, f.router.Cancels, handlerstest.Tenant, "run-tc-cancel")
				}
			},
		})
		assertEnded(t, res, seen, orch.CodeUserCancel, "cancelled by "+handlerstest.User)
		if c := handlerstest.AuditPayloads(t, seen, "run.cancelled"); len(c) != 1 || c[0]["cancelled_by"] != handlerstest.User {
			t.Errorf("run.cancelled audits %v", c)
		}
		if n := len(model.Requests(llm.TaskAct)); n != 0 || env.Demo.Calls(demo.SkillOutletList) != 0 {
			t.Errorf("the cancelled step made %d model calls and %d skill calls", n, env.Demo.Calls(demo.SkillOutletList))
		}
	})

	run(orch.CodeLowConfidence, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		f := patternFlow(t, env, quality(t, nil, map[string]any{"status": "complete", "label": "answer",
			"data": map[string]any{"answer": "o-1"}, "confidence": 0.1, "reason": "a guess"}))
		res, seen := f.drive(t, runStart(t, "run-tc-lowconf", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeLowConfidence, "stayed below the confidence threshold after a reflection pass: the answer's confidence 0.1 is below 0.5: a guess")
		if len(handlerstest.AuditPayloads(t, seen, "critic.escalated")) != 1 {
			t.Errorf("trace %v", traceNames(seen))
		}
	})

	run(orch.CodeSourceConflict, func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		conflict := map[string]any{"status": "conflict", "reason": "the status of o-1", "conflicts": []map[string]any{
			{"source": "outlet_list", "claim": "active"}, {"source": "crm", "claim": "closed"}}}
		f := patternFlow(t, env, quality(t, nil, conflict))
		res, seen := f.drive(t, runStart(t, "run-tc-conflict", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeSourceConflict, "found its sources still in conflict after a cross-check pass: sources conflict on the status of o-1")
		if len(handlerstest.AuditPayloads(t, seen, "critic.escalated")) != 1 || !strings.Contains(string(res.Detail), `"claim":"closed"`) {
			t.Errorf("trace %v, detail %s", traceNames(seen), res.Detail)
		}
	})

	// Every terminal code is reached above: a new code fails this test
	// until it is covered.
	for _, code := range orch.TerminalCodes {
		if !covered[code] {
			t.Errorf("terminal code %s has no subtest", code)
		}
	}
}

// assertEnded checks that the run ended with code, its reason (or, for a
// run with no reason, its response) containing reason, and that the
// trace's run.finished records the same code.
func assertEnded(t *testing.T, res orch.RunResult, seen []event.Event, code, reason string) {
	t.Helper()
	if res.TerminalCode != code {
		t.Fatalf("run ended %s (reason %q), want %s", res.TerminalCode, res.Reason, code)
	}
	if !strings.Contains(res.Reason, reason) && !strings.Contains(res.Response, reason) {
		t.Errorf("%s: reason %q and response %q lack %q", code, res.Reason, res.Response, reason)
	}
	fin := handlerstest.AuditPayloads(t, seen, "run.finished")
	if len(fin) != 1 || fin[0]["terminal_code"] != code {
		t.Errorf("run.finished audits %v, want one with terminal_code %s", fin, code)
	}
}

// runStart is the run.requested event of run runID for task.
func runStart(t *testing.T, runID, task string) event.Event {
	t.Helper()
	return handlerstest.NewEvent(t, runID, events.TypeRunRequested, handlerstest.RunRequest(runID, task))
}

// routedTo is a model that routes to taskType and pattern and otherwise
// answers as the offline model does, except for the replies queued on it.
func routedTo(taskType, pattern string) *llmtest.Scripted {
	m := llmtest.New()
	m.Default = offline.New()
	m.On(llm.TaskRoute, routeTo(taskType, pattern))
	return m
}

// loopCalling is a ReACT run's model: each loop turn calls outlet_list
// with the next of args (JSON), then the loop answers.
func loopCalling(t *testing.T, args ...string) *llmtest.Scripted {
	t.Helper()
	m := routedTo("research", router.PatternReact)
	for i, a := range args {
		m.On(llm.TaskAct, llmtest.ToolCall(fmt.Sprintf("call-%d", i+1), demo.SkillOutletList, a))
	}
	m.On(llm.TaskAct, loopAnswer(t, "done"))
	return m
}

// putPolicy writes the budget policy (an orch.BudgetPolicy as JSON).
func putPolicy(t *testing.T, env *handlerstest.Env, policy string) {
	t.Helper()
	if _, err := env.Config.Put(handlerstest.Ctx(t), router.ConfigKeyBudgets, []byte(policy)); err != nil {
		t.Fatalf("put budget policy: %v", err)
	}
}

// stepwise says what driveStepwise does besides what (*flow).drive does:
// before is called before each event is handled, and the events hold
// selects are kept back, as a slow member's would be, until the run ended.
type stepwise struct {
	before func(event.Event)
	hold   func(event.Event) bool
}

// driveStepwise drives a run as (*flow).drive does, except that a group's
// deadline passes when nothing else is in flight while the run goes on
// (the server delivers it then to a group still waiting for a member),
// and that s acts between the hops. Once the run ended, the held events
// and what they lead to are delivered: none may end the run again.
func driveStepwise(t *testing.T, f *flow, first event.Event, s stepwise) (orch.RunResult, []event.Event) {
	t.Helper()
	ctx := handlerstest.Ctx(t)
	var seen, waiting, held []event.Event
	var results []orch.RunResult
	due := map[string]bool{} // group deadlines that have passed
	pump := func(queue []event.Event, late bool) {
		for len(queue) > 0 || !late && len(results) == 0 && len(waiting) > 0 {
			if len(seen) > 500 {
				t.Fatalf("the run did not finish after %d events: %v", len(seen), handlerstest.Types(seen))
			}
			if len(queue) == 0 {
				// Nothing in flight and the run goes on: the deadlines pass.
				for _, ev := range waiting {
					due[ev.ID()] = true
				}
				queue, waiting = waiting, nil
			}
			ev := queue[0]
			queue = queue[1:]
			typ := ev.Type()
			switch {
			case typ == events.TypeRunFinished:
				if late {
					t.Fatalf("a held event ended the run again: %v", handlerstest.Types(append(seen, ev)))
				}
				seen = append(seen, ev)
				results = append(results, handlerstest.Decode[orch.RunResult](t, ev))
				continue
			case typ == events.TypeReplyChunk:
				continue
			case typ == events.TypeGroupDeadline && !due[ev.ID()] && !late:
				waiting = append(waiting, ev)
				continue
			case typ == events.TypeRunDeadline && !late:
				// Scheduled for long after the run: delivered once it ended.
				held = append(held, ev)
				continue
			case !late && s.hold != nil && s.hold(ev):
				held = append(held, ev)
				continue
			}
			seen = append(seen, ev)
			if s.before != nil {
				s.before(ev)
			}
			h := handlerOf(f, typ)
			if h == nil {
				t.Fatalf("no handler for %s", typ)
			}
			outs, err := h(ctx, ev)
			if err != nil {
				t.Fatalf("Handle %s: %v", typ, err)
			}
			handlerstest.CheckOutputs(t, outs)
			queue = append(queue, outs...)
		}
	}
	pump([]event.Event{first}, false)
	if len(results) != 1 {
		t.Fatalf("got %d run.finished, want exactly 1 (events %v)", len(results), handlerstest.Types(seen))
	}
	pump(append(held, waiting...), true)
	return results[0], seen
}

// handlerOf is the handler of f's role that consumes events of type typ,
// as (*flow).drive routes them, or nil.
func handlerOf(f *flow, typ string) func(context.Context, event.Event) ([]event.Event, error) {
	switch typ {
	case events.TypeRunRequested, events.TypePlanProposed, events.TypeGroupJoined, events.TypeStepJoined, events.TypeRunDeadline,
		events.TypeApprovalDecided:
		return f.route
	case events.TypePlanRequested:
		return f.planner.Handle
	case events.TypeStepRequested, events.TypeStepIterated:
		return f.exec.Handle
	case events.TypeStepFinished, events.TypeGroupDeadline:
		return f.agg.Handle
	}
	if strings.HasPrefix(typ, events.TypeAuditPrefix) {
		return f.project
	}
	return nil
}
