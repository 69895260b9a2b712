package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// Bounded runs (issue 13, seed 003): every budget dimension stops a run
// before it passes its limit, the loop guards, grounding and the circuit
// breakers, driven through the real role handlers, the real budgets
// ledger in NATS and the real demo Skill Service.

// setPolicy writes the budget policy into the config bucket.
func setPolicy(t *testing.T, env *handlerstest.Env, policy string) {
	t.Helper()
	if _, err := env.Config.Put(handlerstest.Ctx(t), router.ConfigKeyBudgets, []byte(policy)); err != nil {
		t.Fatal(err)
	}
}

// runLedger is a run's budget as its run.finished records it.
type runLedger struct {
	Limits orch.Vector `json:"limits"`
	Used   orch.Vector `json:"used"`
}

// runBudgetOf is the budget the run.finished audit event among seen records:
// the limits and what the run drew (its state is its ledger).
func runBudgetOf(t *testing.T, seen []event.Event) runLedger {
	t.Helper()
	fin := handlerstest.AuditPayloads(t, seen, "run.finished")
	if len(fin) != 1 {
		t.Fatalf("%d run.finished events, want 1", len(fin))
	}
	raw, err := json.Marshal(fin[0]["budget"])
	if err != nil {
		t.Fatal(err)
	}
	var l runLedger
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatalf("run.finished budget %s: %v", raw, err)
	}
	return l
}

// calling is a scripted loop model: routed to ReACT, its turns call
// outlet_list with each of statuses in turn, then answer.
func calling(t *testing.T, statuses ...string) *llmtest.Scripted {
	t.Helper()
	m := llmtest.New()
	m.Default = offline.New()
	m.On(llm.TaskRoute, routeTo("research", router.PatternReact))
	for i, s := range statuses {
		m.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ToolCallResp(fmt.Sprintf("c%d", i), demo.SkillOutletList, fmt.Sprintf(`{"status":%q}`, s))})
	}
	m.On(llm.TaskAct, loopAnswer(t, "done"))
	return m
}

// priced is the offline model billed as gpt-4o, so calls cost money.
type priced struct{ llm.Model }

func (p priced) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	resp, err := p.Model.Complete(ctx, req)
	resp.Model = "gpt-4o"
	return resp, err
}

func TestBudget_EveryDimensionStopsTheRunBeforeItsLimit(t *testing.T) {
	wholeRun(t)
	mutating := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false),
		OpenWorldHint: mcp.ToBoolPtr(false)}
	openWorld := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(true)}
	cases := []struct {
		dim     orch.Dim
		limit   float64
		skill   demo.Config
		model   func(t *testing.T) llm.Model
		pattern string // "" plan-then-execute with the offline planner
		code    string
		exact   bool // the run draws exactly up to the limit
	}{
		{dim: orch.DimToolCalls, limit: 2, model: func(t *testing.T) llm.Model { return calling(t, "active", "inactive", "all") }, exact: true},
		{dim: orch.DimModelCalls, limit: 4, model: func(t *testing.T) llm.Model { return calling(t, "active", "inactive", "all", "active") }, exact: true},
		{dim: orch.DimInputTokens, limit: 4000, model: func(*testing.T) llm.Model { return offline.New() }},
		{dim: orch.DimOutputTokens, limit: 300, model: func(*testing.T) llm.Model { return offline.New() }},
		{dim: orch.DimCostUSD, limit: 0.05, model: func(*testing.T) llm.Model {
			return llm.Metered{Model: priced{offline.New()}, Prices: llm.DefaultPrices(), ID: "gpt-4o"}
		}},
		{dim: orch.DimMemoryWrites, limit: 1, model: func(*testing.T) llm.Model { return offline.New() }, exact: true},
		{dim: orch.DimExternalCalls, limit: 1, skill: demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: openWorld}},
			model: func(t *testing.T) llm.Model { return calling(t, "active", "inactive") }, exact: true},
		{dim: orch.DimSideEffects, limit: 1, skill: demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: mutating}},
			model: func(t *testing.T) llm.Model { return calling(t, "active", "inactive") }, exact: true},
		{dim: orch.DimRetries, limit: 1, model: func(t *testing.T) llm.Model {
			m := llmtest.New()
			m.Default = offline.New()
			m.Repeat = true
			m.On(llm.TaskRoute, routeTo("research", router.PatternReact))
			m.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.TextResp("not a step result")})
			return m
		}, exact: true},
		{dim: orch.DimWallClockS, limit: 1, skill: demo.Config{Latency: 700 * time.Millisecond}, code: orch.CodeTimeout,
			model: func(t *testing.T) llm.Model { return calling(t, "active", "inactive", "all") }},
	}
	for _, tc := range cases {
		t.Run(string(tc.dim), func(t *testing.T) {
			env := handlerstest.NewEnvWith(t, tc.skill)
			setPolicy(t, env, fmt.Sprintf(`{"defaults":{%q:%g}}`, tc.dim, tc.limit))
			f := patternFlow(t, env, tc.model(t))
			runID := "run-budget-" + string(tc.dim)
			start := time.Now()
			res, seen := f.drive(t, handlerstest.NewEvent(t, runID, events.TypeRunRequested, handlerstest.RunRequest(runID, handlerstest.RankTask)))
			want := tc.code
			if want == "" {
				want = orch.CodeBudgetExhausted
			}
			if res.TerminalCode != want {
				t.Fatalf("run ended %s (%s), want %s", res.TerminalCode, res.Reason, want)
			}
			if got := handlerstest.ExhaustedDim(t, seen); got != string(tc.dim) {
				t.Errorf("the trace's budget stop names %q, want %s", got, tc.dim)
			}
			if !strings.Contains(string(res.Detail), string(tc.dim)) {
				t.Errorf("the result's detail %s does not name %s", res.Detail, tc.dim)
			}
			e := runBudgetOf(t, seen)
			if used := e.Used[tc.dim]; tc.dim != orch.DimWallClockS && (used > tc.limit+1e-9 || used <= 0 || tc.exact && used != tc.limit) {
				t.Fatalf("ledger %s = %g with limit %g (exact %v): %+v", tc.dim, used, tc.limit, tc.exact, e.Used)
			}
			for _, d := range orch.Dims {
				if e.Used[d] > e.Limits[d]+1e-9 {
					t.Errorf("ledger %s = %g passed its limit %g", d, e.Used[d], e.Limits[d])
				}
			}
			if tc.dim == orch.DimWallClockS && time.Since(start) > 5*time.Second {
				t.Errorf("a 1 s wall clock stopped the run after %s", time.Since(start))
			}
			if tc.dim == orch.DimToolCalls || tc.dim == orch.DimExternalCalls || tc.dim == orch.DimSideEffects {
				if n := env.Demo.Calls(demo.SkillOutletList); float64(n) != tc.limit {
					t.Errorf("the skill ran %d times with a limit of %g", n, tc.limit)
				}
			}
		})
	}
}

func TestBudget_ReflectionPassesBoundReplans(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	setPolicy(t, env, `{"defaults":{"reflection_passes":1}}`)
	model := llmtest.New()
	model.Default = offline.New()
	model.Repeat = true
	model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ActAnswer(t, map[string]any{"status": "failed", "reason": "the data is stale"})},
		llmtest.Reply{Response: handlerstest.ActAnswer(t, map[string]any{"status": "failed", "reason": "the data is still stale"})})
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-reflect", events.TypeRunRequested, handlerstest.RunRequest("run-reflect", "List the active outlets")))
	if res.TerminalCode != orch.CodeBudgetExhausted || !strings.Contains(res.Reason, "reflection") {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if n := len(handlerstest.AuditPayloads(t, seen, "replan.triggered")); n != 1 {
		t.Errorf("%d replans with a budget of one", n)
	}
	if e := runBudgetOf(t, seen); e.Used[orch.DimReflectionPasses] != 1 {
		t.Errorf("ledger reflection passes %g, want 1", e.Used[orch.DimReflectionPasses])
	}
}

func TestBudget_RequestOverridesStayWithinTenantCaps(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	setPolicy(t, env, fmt.Sprintf(`{"tenants":{%q:{"tool_calls":1}}}`, handlerstest.Tenant))
	f := patternFlow(t, env, calling(t, "active", "inactive"))
	req := handlerstest.RunRequest("run-cap", handlerstest.RankTask)
	req.Budget = orch.Vector{orch.DimToolCalls: 10}
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-cap", events.TypeRunRequested, req))
	if res.TerminalCode != orch.CodeBudgetExhausted {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	resolved := handlerstest.AuditPayloads(t, seen, "budget.resolved")
	if len(resolved) != 1 || !slices.Contains(resolved[0]["clamped_by_tenant_caps"].([]any), any(string(orch.DimToolCalls))) {
		t.Errorf("budget.resolved %v does not record the clamp", resolved)
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
		t.Errorf("the skill ran %d times under a cap of 1", n)
	}
}

func TestLoopGuard_RepeatedIdenticalCallIsBlocked(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := patternFlow(t, env, calling(t, "active", "active", "active", "active", "active"))
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-loop", events.TypeRunRequested, handlerstest.RunRequest("run-loop", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeRepeatedFailure || !strings.Contains(res.Reason, "loop guard") {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	g := handlerstest.AuditPayloads(t, seen, "guard.repeated_call")
	if len(g) != 1 || g[0]["skill_id"] != demo.SkillOutletList || g[0]["count"] != 4.0 || g[0]["args_hash"] != executor.ArgsHash(json.RawMessage(`{"status":"active"}`)) {
		t.Fatalf("guard.repeated_call %v", g)
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != executor.DefaultRepeatCallLimit {
		t.Errorf("the skill ran %d times; the guard allows %d identical calls", n, executor.DefaultRepeatCallLimit)
	}
	if len(handlerstest.AuditPayloads(t, seen, "replan.triggered")) != 0 {
		t.Error("a loop-guard stop was replanned")
	}
	// Argument order and spacing do not make a call different.
	if executor.ArgsHash(json.RawMessage(`{"a":1,"b":[2]}`)) != executor.ArgsHash(json.RawMessage(`{ "b": [2], "a": 1 }`)) {
		t.Error("ArgsHash depends on key order")
	}
}

func TestReplan_IntoTheSameFailureEndsAtOnce(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnvWith(t, demo.Config{FailFirst: map[string]int{demo.SkillOutletList: 100}})
	model := llmtest.New()
	model.Default = offline.New()
	model.Repeat = true
	model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ActAnswer(t, map[string]any{"status": "failed", "reason": "outlet_list keeps failing"})})
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-same", events.TypeRunRequested, handlerstest.RunRequest("run-same", "List the active outlets")))
	if res.TerminalCode != orch.CodeRepeatedFailure || !strings.Contains(res.Reason, "failed the same way") {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if n := len(handlerstest.AuditPayloads(t, seen, "replan.triggered")); n != 1 {
		t.Errorf("%d replans; the second identical failure must end the run (the limit is %d)", n, orch.MaxReplans)
	}
	g := handlerstest.AuditPayloads(t, seen, "guard.repeated_step")
	if len(g) != 1 || g[0]["failure"] != "outlet_list keeps failing" {
		t.Fatalf("guard.repeated_step %v", g)
	}
}

func TestGrounding_AnAnswerWithNoObservationIsNeverWritten(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.Repeat = true
	// The model claims outlets without calling a skill.
	model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids",
		"data": map[string]any{"outlet_ids": []string{"out-999"}}})})
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-ground", events.TypeRunRequested, handlerstest.RunRequest("run-ground", handlerstest.RankTask)))
	if res.TerminalCode == orch.CodeSuccess {
		t.Fatal("a run whose every answer is ungrounded succeeded")
	}
	if len(handlerstest.AuditPayloads(t, seen, "grounding.refused")) == 0 {
		t.Fatal("no grounding.refused in the trace")
	}
	if slices.Contains(traceNames(seen), "memory.written") {
		t.Fatal("an ungrounded answer was written to memory")
	}
	for _, s := range res.Steps {
		if s.TaskID == "" {
			continue
		}
		scope := memory.MemoryScope{TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, TaskID: s.TaskID}
		handlerstest.AssertNoMemory(t, env, scope.Key("outlet_ids"))
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
		t.Errorf("the skill ran %d times; the model never called it", n)
	}
}

func TestGrounding_AModelOnlyStepCommitsWithoutAnObservation(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	x := handlerstest.NewExecutor(env, handlerstest.Repeating(handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids",
		"data": map[string]any{"outlet_ids": []string{"out-001"}}})), env.Toolcalls)
	x.Budgets = env.Budgets
	req := handlerstest.ExecRequest("run-model-only", 1)
	req.Run.Plan.Steps[0].ModelOnly = true
	outs := handlerstest.HandleTurns(t, x, handlerstest.NewEvent(t, "step-model-only", events.TypeStepRequested, req))
	if sf := handlerstest.Finished(t, outs); sf.Result.Outcome != orch.OutcomeComplete || sf.Result.MemoryKey == "" {
		t.Fatalf("a model-only step's answer: %+v", sf.Result)
	}
	// The same answer on a step that must observe is refused.
	x = handlerstest.NewExecutor(env, handlerstest.Repeating(handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids",
		"data": map[string]any{"outlet_ids": []string{"out-001"}}})), env.Toolcalls)
	req = handlerstest.ExecRequest("run-must-observe", 1)
	outs = handlerstest.HandleTurns(t, x, handlerstest.NewEvent(t, "step-must-observe", events.TypeStepRequested, req))
	if sf := handlerstest.Finished(t, outs); sf.Result.Outcome != orch.OutcomeFailed || !strings.Contains(sf.Result.Reason, "ungrounded") {
		t.Fatalf("an unobserved answer: %+v", sf.Result)
	}
}

func TestGrounding_AnIdentifierNoObservationHoldsIsRefused(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.Repeat = true
	model.On(llm.TaskRoute, routeTo("general", router.PatternPlanThenExecute))
	// The model observes the outlets, then answers with an id it made up.
	model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ToolCallResp("c1", demo.SkillOutletList, `{"status":"active"}`)},
		llmtest.Reply{Response: handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids",
			"data": map[string]any{"outlet_ids": []string{"out-001", "out-999"}}})})
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-ids", events.TypeRunRequested, handlerstest.RunRequest("run-ids", "List the active outlets")))
	if res.TerminalCode == orch.CodeSuccess {
		t.Fatal("a run whose answer names an outlet it never observed succeeded")
	}
	refused := handlerstest.AuditPayloads(t, seen, "grounding.refused")
	if !slices.ContainsFunc(refused, func(p map[string]any) bool { return fmt.Sprint(p["unobserved_ids"]) == "[out-999]" }) {
		t.Fatalf("grounding.refused %v, want out-999 named", refused)
	}
	if slices.Contains(traceNames(seen), "memory.written") {
		t.Fatal("an answer with a made-up identifier was written to memory")
	}
	// The observed id alone is grounded: the same flow answering with it succeeds.
	env = handlerstest.NewEnv(t)
	model = llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("general", router.PatternPlanThenExecute))
	model.On(llm.TaskPlan, llmtest.Text(fmt.Sprintf(`{"steps":[{"step":1,"task":"List the active outlets","skills":[%q],"return_spec":{"shape":%s}}]}`,
		demo.SkillOutletList, handlerstest.OutletIDsShape)))
	model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ToolCallResp("c1", demo.SkillOutletList, `{"status":"active"}`)},
		llmtest.Reply{Response: handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids",
			"data": map[string]any{"outlet_ids": []string{"out-001"}}})})
	res, _ = patternFlow(t, env, model).drive(t, handlerstest.NewEvent(t, "run-ids-ok", events.TypeRunRequested, handlerstest.RunRequest("run-ids-ok", "List the active outlets")))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("a grounded answer ended %s: %s", res.TerminalCode, res.Reason)
	}
}

func TestBreakers_OpenFailFastAndRecoverHalfOpen(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	b := &ledger.Breakers{Failures: 3, Cooldown: time.Minute, Now: func() time.Time { return now }}
	const k = "beta/outlet_list"
	for i := range 3 {
		if err := b.Allow(k); err != nil {
			t.Fatalf("call %d refused while closed: %v", i+1, err)
		}
		st := b.Done(k, false)
		if want := map[bool]string{true: ledger.CircuitOpen, false: ""}[i == 2]; st != want {
			t.Fatalf("failure %d moved the circuit to %q, want %q", i+1, st, want)
		}
	}
	var open *ledger.CircuitOpenError
	if err := b.Allow(k); !errors.As(err, &open) || !errors.Is(err, ledger.ErrCircuitOpen) || open.Failures != 3 {
		t.Fatalf("an open circuit allowed a call: %v", err)
	}
	if b.Allow("beta/other") != nil {
		t.Fatal("one skill's circuit refused another skill")
	}
	now = now.Add(time.Minute)
	if err := b.Allow(k); err != nil {
		t.Fatalf("no trial call after the cooldown: %v", err)
	}
	if b.Allow(k) == nil {
		t.Fatal("a second call went through while the trial was in flight")
	}
	if st := b.Done(k, false); st != ledger.CircuitOpen {
		t.Fatalf("a failed trial left the circuit %q", st)
	}
	if b.Allow(k) == nil {
		t.Fatal("the circuit did not reopen after a failed trial")
	}
	now = now.Add(time.Minute)
	if err := b.Allow(k); err != nil {
		t.Fatal(err)
	}
	if st := b.Done(k, true); st != ledger.CircuitClosed || b.State(k) != ledger.CircuitClosed {
		t.Fatalf("a good trial left the circuit %q", b.State(k))
	}
	if b.Allow(k) != nil {
		t.Fatal("a closed circuit refused a call")
	}
}

func TestBreakers_AFailingSkillFailsFastThenRecovers(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnvWith(t, demo.Config{FailFirst: map[string]int{demo.SkillOutletList: 2}})
	now := time.Now()
	breakers := &ledger.Breakers{Failures: 2, Cooldown: time.Minute, Now: func() time.Time { return now }}
	f := patternFlow(t, env, calling(t, "active", "inactive", "all"))
	f.exec.Breakers = breakers
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-cb1", events.TypeRunRequested, handlerstest.RunRequest("run-cb1", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeUnavailableDep || !strings.Contains(res.Reason, "circuit open") {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if !slices.Contains(traceNames(seen), "circuit.open") || !slices.Contains(traceNames(seen), "circuit.refused") {
		t.Fatalf("trace %v lacks circuit.open and circuit.refused", traceNames(seen))
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != 2 {
		t.Fatalf("the skill ran %d times; the third call must fail fast", n)
	}
	// After the cooldown one trial call goes through; it succeeds and the
	// circuit closes.
	now = now.Add(time.Minute)
	f = patternFlow(t, env, calling(t, "active"))
	f.exec.Breakers = breakers
	res, seen = f.drive(t, handlerstest.NewEvent(t, "run-cb2", events.TypeRunRequested, handlerstest.RunRequest("run-cb2", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("the recovered run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if !slices.Contains(traceNames(seen), "circuit.closed") || breakers.State(handlerstest.Tenant+"/"+demo.SkillOutletList) != ledger.CircuitClosed {
		t.Fatalf("the circuit did not close: trace %v", traceNames(seen))
	}
}

// notCalledFirst fails the first n calls before they reach any skill, as
// a tool registry that cannot be read does.
type notCalledFirst struct {
	executor.SkillCaller
	n atomic.Int32
}

func (c *notCalledFirst) Call(ctx context.Context, tenant, name string, args json.RawMessage, key string) ([]byte, error) {
	if c.n.Add(-1) >= 0 {
		return nil, fmt.Errorf("%w: tool definitions: %w", skills.ErrNotCalled, context.DeadlineExceeded)
	}
	return c.SkillCaller.Call(ctx, tenant, name, args, key)
}

// TestBreakers_ACallThatNeverReachedTheSkillLeavesItsCircuit: calls that
// fail before they reach the skill (its registry unreadable, as on a
// cluster's leader change) are retried as a failed hop, and count
// neither toward opening the skill's circuit nor as a half-open trial.
func TestBreakers_ACallThatNeverReachedTheSkillLeavesItsCircuit(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	breakers := &ledger.Breakers{Failures: 2, Cooldown: time.Minute}
	f := patternFlow(t, env, calling(t, "active"))
	f.exec.Breakers = breakers
	caller := &notCalledFirst{SkillCaller: f.exec.Skills}
	caller.n.Store(3)
	f.exec.Skills, f.redeliveries = caller, 3
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-nc", events.TypeRunRequested, handlerstest.RunRequest("run-nc", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if f.redeliveries != 0 {
		t.Fatalf("%d of 3 redeliveries left: the calls did not fail", f.redeliveries)
	}
	k := handlerstest.Tenant + "/" + demo.SkillOutletList
	if st := breakers.State(k); st != ledger.CircuitClosed || slices.Contains(traceNames(seen), "circuit.open") {
		t.Fatalf("the circuit is %s after calls that never reached the skill (trace %v)", st, traceNames(seen))
	}

	// Half-open: a call that never reached the skill does not spend the
	// trial; the next call is the trial.
	for range 2 {
		_ = breakers.Allow(k)
		breakers.Done(k, false)
	}
	breakers.Now = func() time.Time { return time.Now().Add(time.Minute) }
	if err := breakers.Allow(k); err != nil {
		t.Fatal(err)
	}
	breakers.Skip(k)
	if st := breakers.State(k); st != ledger.CircuitHalfOpen {
		t.Fatalf("a skipped trial left the circuit %s", st)
	}
	if err := breakers.Allow(k); err != nil {
		t.Fatalf("the trial was spent by a call that never reached the skill: %v", err)
	}
}

// TestBreakers_SharedAcrossExecutors: two executors share their circuits
// through the circuits bucket. The one that finds the skill failing
// opens the circuit for both: a run on the other is refused at once,
// without calling the skill; after the cooldown the other's trial
// succeeds and closes the circuit in the first as well.
func TestBreakers_SharedAcrossExecutors(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnvWith(t, demo.Config{FailFirst: map[string]int{demo.SkillOutletList: 2}})
	ctx := handlerstest.Ctx(t)
	shared, err := env.JS.KeyValue(ctx, ledger.BucketCircuits)
	if err != nil {
		t.Fatal(err)
	}
	clock := handlerstest.NewClock(time.Now())
	a := &ledger.Breakers{Failures: 2, Cooldown: time.Minute, Now: clock.Now, Shared: shared}
	b := &ledger.Breakers{Failures: 2, Cooldown: time.Minute, Now: clock.Now, Shared: shared}
	for _, br := range []*ledger.Breakers{a, b} {
		if err := br.Follow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	k := handlerstest.Tenant + "/" + demo.SkillOutletList
	eventually := func(br *ledger.Breakers, want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); br.State(k) != want; {
			if time.Now().After(deadline) {
				t.Fatalf("the circuit is %s, want %s", br.State(k), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	f := patternFlow(t, env, calling(t, "active", "inactive", "all"))
	f.exec.Breakers = a
	if res, _ := f.drive(t, handlerstest.NewEvent(t, "run-sh1", events.TypeRunRequested, handlerstest.RunRequest("run-sh1", handlerstest.RankTask))); res.TerminalCode != orch.CodeUnavailableDep {
		t.Fatalf("run on executor a ended %s: %s", res.TerminalCode, res.Reason)
	}
	eventually(b, ledger.CircuitOpen)
	f = patternFlow(t, env, calling(t, "active"))
	f.exec.Breakers = b
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-sh2", events.TypeRunRequested, handlerstest.RunRequest("run-sh2", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeUnavailableDep || !strings.Contains(res.Reason, "circuit open") ||
		!slices.Contains(traceNames(seen), "circuit.refused") {
		t.Fatalf("run on executor b ended %s: %s", res.TerminalCode, res.Reason)
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != 2 {
		t.Fatalf("the skill ran %d times; executor b must refuse it once executor a opened the circuit", n)
	}

	clock.Add(time.Minute)
	f = patternFlow(t, env, calling(t, "active"))
	f.exec.Breakers = b
	if res, seen := f.drive(t, handlerstest.NewEvent(t, "run-sh3", events.TypeRunRequested, handlerstest.RunRequest("run-sh3", handlerstest.RankTask))); res.TerminalCode != orch.CodeSuccess ||
		!slices.Contains(traceNames(seen), "circuit.closed") {
		t.Fatalf("b's trial run ended %s: %s", res.TerminalCode, res.Reason)
	}
	eventually(a, ledger.CircuitClosed)
	if err := a.Allow(k); err != nil {
		t.Fatalf("a refuses a closed circuit: %v", err)
	}
}
