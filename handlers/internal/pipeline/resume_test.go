package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// Clarify and resume, budget release (issue 37): a run that needs one
// more fact, or whose intent is ambiguous, parks at a clarify gate and
// resumes with the answer; a run whose budget ran out parks at a budget
// gate and resumes with an approved extension. Whole runs through the
// real roles, the real buckets and the real demo Skill Service; the model
// is the offline one, scripted where the test needs a question asked.

// thePeriod is the answer the lacking step waits for.
const thePeriod = "the last 30 days"

// lacking is the offline model, except that a step allowed engagement
// analytics reports the reporting period missing until its turns tell it
// the user's answer.
type lacking struct{ llm.Model }

func (m lacking) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	in, ok := req.Input.(llm.ActInput)
	if req.Task != llm.TaskAct || !ok || !slices.ContainsFunc(in.Skills, func(s llm.SkillInfo) bool { return s.Name == demo.SkillEngagementAnalytics }) ||
		slices.ContainsFunc(req.Messages, func(msg llm.Message) bool { return strings.Contains(msg.Content, "answered: "+thePeriod) }) {
		return m.Model.Complete(ctx, req)
	}
	return handlerstest.TextResp(`{"status":"insufficient","reason":"needs the reporting period","suggestion":"ask the user for the period"}`), nil
}

// askingFlow is a flow whose executor lacks the reporting period.
func askingFlow(t *testing.T, env *handlerstest.Env) *flow {
	t.Helper()
	f := newFlow(t, env, env.Store)
	f.exec.Model = lacking{offline.New()}
	return f
}

// parkedAsking runs runID until it asks for the reporting period, and
// checks what it parked with.
func parkedAsking(t *testing.T, env *handlerstest.Env, f *flow, runID string) (orch.RunParked, pumped) {
	t.Helper()
	p := f.pump(t, runStart(t, runID, handlerstest.RankTask))
	if len(p.finished) != 0 || len(p.parked) != 1 {
		t.Fatalf("want the run parked: finished %+v, parked %+v; trace %v", p.finished, p.parked, traceNames(p.seen))
	}
	parked := p.parked[0]
	if q := parked.Gate.Question; parked.Gate.Kind != orch.GateClarify || q == nil || q.Text != "needs the reporting period" ||
		q.Code != orch.CodeMissingInfo {
		t.Fatalf("parked at %+v", parked.Gate)
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
		t.Fatalf("outlet_list ran %d times before the question, want once", n)
	}
	sess, _, err := (&runctl.Sessions{KV: env.Sessions}).Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.Clarify == nil || sess.Clarify.RunID != runID || sess.Clarify.GateID != parked.Gate.Gate {
		t.Fatalf("the session does not wait for the answer: %+v, %v", sess.Clarify, err)
	}
	return parked, p
}

// assertResumed checks that run runID, answered, finished SUCCESS
// without running its completed step again, the answer seen by the step
// that lacked it, and that a replay re-derives it.
func assertResumed(t *testing.T, env *handlerstest.Env, runID string, before, after pumped) orch.RunResult {
	t.Helper()
	if len(after.finished) != 1 || after.finished[0].RunID != runID || after.finished[0].TerminalCode != orch.CodeSuccess {
		t.Fatalf("after the answer: %+v (trace %v)", after.finished, traceNames(after.seen))
	}
	// The skill's call counts: the completed step did not run again.
	if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
		t.Errorf("outlet_list ran %d times in all, want once: the completed step ran again", n)
	}
	if n := env.Demo.Calls(demo.SkillEngagementAnalytics); n != 1 {
		t.Errorf("engagement_analytics ran %d times, want once, after the answer", n)
	}
	if a := handlerstest.AuditPayloads(t, after.seen, "clarification.answered"); len(a) != 1 || a[0]["answer"] != thePeriod {
		t.Errorf("clarification.answered %v", a)
	}
	sess, _, err := (&runctl.Sessions{KV: env.Sessions}).Get(handlerstest.Ctx(t), handlerstest.Tenant, handlerstest.Session)
	if err != nil || sess.Clarify != nil {
		t.Errorf("the session still waits for an answer: %+v, %v", sess.Clarify, err)
	}
	rep := runctl.ReplayRun(runID, append(slices.Clone(before.seen), after.seen...), gatesOf(t, env, runID))
	if rep.Decisions == 0 || len(rep.Divergences) > 0 || rep.Code != orch.CodeSuccess {
		t.Errorf("replay: %d decisions, code %s, divergences %+v", rep.Decisions, rep.Code, rep.Divergences)
	}
	return after.finished[0]
}

// TestClarify_AMissingFactParksTheRunAndTheAnswerResumesIt: the run's
// second step reports the reporting period missing and no replan supplies
// it: the run parks at a clarify gate with its plan and its completed
// first step. The answer, given to the approval or as the session's next
// message (with and without a session queue), resumes the same run,
// which finishes SUCCESS without running the completed step again;
// unanswered, the gate expires and the run ends MISSING_INFO.
func TestClarify_AMissingFactParksTheRunAndTheAnswerResumesIt(t *testing.T) {
	wholeRun(t)
	t.Run("answered at the gate", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		f := askingFlow(t, env)
		parked, before := parkedAsking(t, env, f, "run-ask-gate")
		after := f.decide(t, env, parked, orch.ApprovalDecided{Decision: orch.GateApproved, By: "ada", Answer: thePeriod})
		res := assertResumed(t, env, "run-ask-gate", before, after)
		if len(res.Answered) != 0 {
			t.Errorf("answered by %v, want no other request", res.Answered)
		}
	})
	for _, queued := range []bool{false, true} {
		name := "the session's next message"
		if queued {
			name += ", queued behind the run"
		}
		t.Run(name, func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			f := askingFlow(t, env)
			if queued {
				f.router.SessionRuns = &runctl.SessionRuns{KV: sessionRunsBucket(t, env)}
			}
			parked, before := parkedAsking(t, env, f, "run-ask-next")
			after := f.pump(t, runStart(t, "run-the-answer", thePeriod))
			res := assertResumed(t, env, "run-ask-next", before, after)
			if !slices.Equal(res.Answered, []string{"run-the-answer"}) {
				t.Errorf("answered by %v, want the answering request's caller told", res.Answered)
			}
			if n := len(handlerstest.OfType(after.seen, events.TypePlanRequested)); n != 1 {
				t.Errorf("%d plan.requested after the answer, want the answered run's replan alone", n)
			}
			rec, _, err := env.Gates.Get(handlerstest.Ctx(t), handlerstest.Tenant, "run-ask-next", parked.Gate.Gate)
			if err != nil || rec.Answer != thePeriod || rec.AnswerRun != "run-the-answer" || rec.By != handlerstest.User {
				t.Errorf("gate record %+v, %v", rec, err)
			}
			if queued {
				// The answer left no run queued in the session.
				e, err := sessionRunsBucket(t, env).Get(handlerstest.Ctx(t), sessionRunsKey)
				if err != nil || strings.Contains(string(e.Value()), "run-the-answer") {
					t.Errorf("session queue %s, %v", e.Value(), err)
				}
			}
			// Now that nothing waits, the session's next message is a run
			// of its own (which asks for the period in its turn).
			next := f.pump(t, runStart(t, "run-after", handlerstest.RankTask))
			if len(next.parked) != 1 || next.parked[0].RunID != "run-after" || len(handlerstest.OfType(next.seen, events.TypePlanRequested)) == 0 {
				t.Errorf("the message after the answer: parked %+v, finished %+v", next.parked, next.finished)
			}
		})
	}
	t.Run("unanswered", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		f := askingFlow(t, env)
		parkedAsking(t, env, f, "run-ask-ttl")
		res, seen := f.drive(t, runStart(t, "run-ask-ttl", handlerstest.RankTask))
		assertEnded(t, res, seen, orch.CodeMissingInfo, "needs the reporting period")
		if res.Status != orch.PlanExpired || !strings.Contains(res.Reason, "before it expired") {
			t.Errorf("status %s, reason %q", res.Status, res.Reason)
		}
	})
}

// TestClarify_AnAmbiguousTaskIsRoutedAgainWithItsAnswer: the routing model
// asks which outlets are meant; the run parks with the question, and the
// answer routes the same run again, the task with its clarification, to
// its end; declined, the run ends AMBIGUOUS_INTENT.
func TestClarify_AnAmbiguousTaskIsRoutedAgainWithItsAnswer(t *testing.T) {
	wholeRun(t)
	asks := llmtest.Text(`{"task_type":"general","pattern":"react","reason":"two readings","clarify":"Which outlets: the active ones or all of them?"}`)
	for _, decision := range []string{orch.GateApproved, orch.GateRejected} {
		t.Run(decision, func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			model := llmtest.New()
			model.Default = offline.New()
			model.On(llm.TaskRoute, asks, routeTo("general", router.PatternPlanThenExecute))
			f := patternFlow(t, env, model)
			p := f.pump(t, runStart(t, "run-intent", "Rank the outlets"))
			if len(p.parked) != 1 || p.parked[0].Gate.Question == nil || p.parked[0].Gate.Question.Code != orch.CodeAmbiguousIntent {
				t.Fatalf("parked %+v, finished %+v", p.parked, p.finished)
			}
			if n := len(handlerstest.OfType(p.seen, events.TypePlanRequested)); n != 0 {
				t.Fatalf("an ambiguous task was planned (%d plan.requested)", n)
			}
			after := f.decide(t, env, p.parked[0], orch.ApprovalDecided{Decision: decision, By: "ada", Answer: "the active ones"})
			if decision == orch.GateRejected {
				if len(after.finished) != 1 || after.finished[0].TerminalCode != orch.CodeAmbiguousIntent ||
					!strings.Contains(after.finished[0].Reason, "active ones or all") {
					t.Fatalf("declined: %+v", after.finished)
				}
				return
			}
			if len(after.finished) != 1 || after.finished[0].TerminalCode != orch.CodeSuccess || after.finished[0].RunID != "run-intent" {
				t.Fatalf("answered: %+v (trace %v)", after.finished, traceNames(after.seen))
			}
			routes := model.Requests(llm.TaskRoute)
			if len(routes) != 2 || !strings.Contains(routes[1].Input.(llm.RouteInput).Task, "Answered: the active ones") {
				t.Errorf("%d routing calls; the second's task does not carry the answer", len(routes))
			}
			if d := handlerstest.AuditPayloads(t, after.seen, "routing.decided"); len(d) != 1 || d[0]["pattern"] != router.PatternPlanThenExecute {
				t.Errorf("routing.decided %v", d)
			}
		})
	}
}

// releasingPolicy allows one tool call per run and lets an operator
// release up to ten to the test tenant's runs.
const releasingPolicy = `{"defaults":{"tool_calls":1},"tenants":{"` + handlerstest.Tenant + `":{"tool_calls":10}},` +
	`"release":{"` + handlerstest.Tenant + `":{"gate_ttl_s":600}}}`

// TestBudgetGate_AnApprovedExtensionLetsTheRunFinish: with its tenant's
// release setting, a ReACT run whose second tool call the budget refuses
// parks at a budget gate with its ledger instead of ending. Approved with
// a larger tool-call limit, it takes its turn again, makes the call and
// finishes SUCCESS without repeating the first call; denied, or expired,
// it ends BUDGET_EXHAUSTED. An extension the caps leave nothing of is
// refused and the gate stays open.
func TestBudgetGate_AnApprovedExtensionLetsTheRunFinish(t *testing.T) {
	wholeRun(t)
	for _, decision := range []string{orch.GateApproved, orch.GateRejected, orch.GateExpired} {
		t.Run(decision, func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			putPolicy(t, env, releasingPolicy)
			f := patternFlow(t, env, loopCalling(t, `{"status":"active"}`, `{"status":"inactive"}`, `{"status":"inactive"}`))
			runID := "run-budget-gate-" + decision
			parked, expiry, before := f.parkedRun(t, runID, handlerstest.RankTask)
			b := parked.Gate.Budget
			if parked.Gate.Kind != orch.GateBudget || b == nil || b.Dimension != orch.DimToolCalls || b.Limits[orch.DimToolCalls] != 1 ||
				b.Used[orch.DimToolCalls] != 1 || b.Caps[orch.DimToolCalls] != 10 || b.Resume != orch.ResumeSteps {
				t.Fatalf("parked at %+v (ledger %+v)", parked.Gate, b)
			}
			if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
				t.Fatalf("outlet_list ran %d times before the gate", n)
			}
			var after pumped
			switch decision {
			case orch.GateApproved:
				_, _, err := env.Gates.Resolve(handlerstest.Ctx(t), handlerstest.Tenant, orch.ApprovalDecided{RunID: runID,
					Gate: parked.Gate.Gate, Decision: orch.GateApproved, By: "ops", Extension: orch.Vector{orch.DimWallClockS: 60}})
				if !errors.Is(err, runctl.ErrInvalidExtension) {
					t.Fatalf("a wall-clock extension: %v, want ErrInvalidExtension", err)
				}
				after = f.decide(t, env, parked, orch.ApprovalDecided{Decision: orch.GateApproved, By: "ops",
					Extension: orch.Vector{orch.DimToolCalls: 4}})
			case orch.GateRejected:
				after = f.decide(t, env, parked, orch.ApprovalDecided{Decision: orch.GateRejected, By: "ops", Comment: "enough"})
			default:
				after = f.pump(t, delivered(expiry))
			}
			if len(after.finished) != 1 {
				t.Fatalf("after %s: %+v (trace %v)", decision, after.finished, traceNames(after.seen))
			}
			res := after.finished[0]
			if decision != orch.GateApproved {
				if res.TerminalCode != orch.CodeBudgetExhausted || !strings.Contains(res.Reason, "tool_calls") {
					t.Fatalf("%s: ended %s: %s", decision, res.TerminalCode, res.Reason)
				}
				if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
					t.Errorf("%s: outlet_list ran %d times, want once", decision, n)
				}
				return
			}
			if res.TerminalCode != orch.CodeSuccess {
				t.Fatalf("approved: ended %s: %s", res.TerminalCode, res.Reason)
			}
			// The first call is not made again; the refused one is, once.
			if n := env.Demo.Calls(demo.SkillOutletList); n != 2 {
				t.Errorf("outlet_list ran %d times in all, want 2", n)
			}
			rel := handlerstest.AuditPayloads(t, after.seen, "budget.released")
			if len(rel) != 1 || rel[0]["by"] != "ops" {
				t.Errorf("budget.released %v", rel)
			}
			if l := runBudgetOf(t, after.seen); l.Limits[orch.DimToolCalls] != 5 || l.Used[orch.DimToolCalls] != 2 {
				t.Errorf("budget after the extension %+v, want 2 of 5 tool calls", l)
			}
			rep := runctl.ReplayRun(runID, append(slices.Clone(before), after.seen...), gatesOf(t, env, runID))
			if len(rep.Divergences) > 0 || rep.Code != orch.CodeSuccess {
				t.Errorf("replay: code %s, divergences %+v", rep.Code, rep.Divergences)
			}
		})
	}
}
