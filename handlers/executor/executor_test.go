package executor_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// localWriteOutlets is the demo service with outlet_list annotated as a
// local write (neither read-only nor destructive): its calls have side
// effects, so the executor keeps their idempotency records.
func localWriteOutlets() demo.Config {
	return demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: {
		ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(false)}}}
}

// activeOutletIDs are the ids of the demo catalog's active outlets.
var activeOutletIDs = []string{"out-001", "out-002", "out-004", "out-005", "out-006", "out-008", "out-009", "out-011"}

func TestExecutorRunsStepToMemory(t *testing.T) {
	env := handlerstest.NewEnv(t)
	x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
	req := handlerstest.ExecRequest("run-x1", 1)
	reqEv := handlerstest.NewEvent(t, "step-x1", events.TypeStepRequested, req)

	// Turn 1: the model calls the allowed skill; the result becomes a turn.
	outs := handlerstest.HandleStep(t, x, reqEv)
	itEv := handlerstest.Only(t, outs, events.TypeStepIterated)
	it := handlerstest.Decode[orch.StepRequest](t, itEv)
	if len(it.Turns) != 2 {
		t.Fatalf("got %d turns, want 2 (call + result): %+v", len(it.Turns), it.Turns)
	}
	call, result := it.Turns[0], it.Turns[1]
	if call.Role != "assistant" || call.ToolName != demo.SkillOutletList || call.ToolCallID == "" {
		t.Errorf("call turn = %+v", call)
	}
	handlerstest.AssertJSON(t, call.ToolArgs, `{"status":"active"}`)
	if result.Role != "tool" || result.IsError || result.ToolCallID != call.ToolCallID || result.ToolName != demo.SkillOutletList {
		t.Errorf("result turn = %+v", result)
	}
	var listed struct {
		Outlets []struct {
			OutletID string `json:"outlet_id"`
			Status   string `json:"status"`
		} `json:"outlets"`
	}
	if err := json.Unmarshal([]byte(result.Content), &listed); err != nil || len(listed.Outlets) != len(activeOutletIDs) {
		t.Fatalf("result content %q (%v), want the %d active outlets", result.Content, err, len(activeOutletIDs))
	}
	if it.Step != 1 || it.Group != req.Group || it.Run.Seq != req.Run.Seq {
		t.Errorf("iteration lost the step context: step %d group %+v seq %d", it.Step, it.Group, it.Run.Seq)
	}
	a, called := handlerstest.AuditOf(t, outs, "skill.called")
	if a.SkillID != demo.SkillOutletList || a.TaskID != "task-1" || called["is_error"] != false || called["tenant_id"] != handlerstest.Tenant {
		t.Errorf("skill.called audit = %+v %v", a, called)
	}
	if got := events.Ext(handlerstest.Only(t, outs, events.AuditType("skill.called")), events.ExtTask); got != "task-1" {
		t.Errorf("audit taskid extension = %q", got)
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
		t.Errorf("outlet_list called %d times, want 1", n)
	}

	// Turn 2: the model answers; the answer is checked and written to memory.
	outs = handlerstest.HandleStep(t, x, itEv)
	sf := handlerstest.Finished(t, outs)
	wantKey := handlerstest.Tenant + ":" + handlerstest.Session + ":task-1:outlet_ids"
	if sf.Result.Outcome != orch.OutcomeComplete || sf.Result.MemoryKey != wantKey || !sf.Result.Validated {
		t.Fatalf("result = %+v, want complete, validated, under %s", sf.Result, wantKey)
	}
	if sf.Result.Step != 1 || sf.Result.TaskID != "task-1" || sf.Group != req.Group || sf.Result.FinishedAt.IsZero() {
		t.Errorf("result identity = %+v group %+v", sf.Result, sf.Group)
	}
	m, err := env.Store.GetMemory(handlerstest.Ctx(t), wantKey)
	if err != nil {
		t.Fatalf("GetMemory: %v", err)
	}
	var stored struct {
		OutletIDs []string `json:"outlet_ids"`
	}
	if err := json.Unmarshal([]byte(m.Text), &stored); err != nil || !slices.Equal(stored.OutletIDs, activeOutletIDs) {
		t.Errorf("memory text %q, want outlet_ids %v", m.Text, activeOutletIDs)
	}
	if m.TenantID != handlerstest.Tenant || m.SessionID != handlerstest.Session || m.TaskID != "task-1" || m.StepIndex != 1 || m.PlanID != req.Run.Plan.PlanID {
		t.Errorf("memory scope = %+v", m)
	}
	if _, written := handlerstest.AuditOf(t, outs, "memory.written"); written["key"] != wantKey || written["validated"] != true {
		t.Errorf("memory.written audit = %v", written)
	}
	if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
		t.Errorf("outlet_list called %d times after the answer, want 1", n)
	}
	// A step dispatched alone is its key's only writer: it takes no lock.
	if handlerstest.LockTaken(t, env, wantKey) {
		t.Errorf("a step dispatched alone locked its key %s", wantKey)
	}
}

func TestExecutorReadsInputs(t *testing.T) {
	env := handlerstest.NewEnv(t)
	x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
	key := handlerstest.Tenant + ":" + handlerstest.Session + ":task-1:outlet_ids"
	req := handlerstest.ExecRequest("run-x2", 2, key)

	_, err := x.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "step-x2-missing", events.TypeStepRequested, req))
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("err = %v, want the missing input reported", err)
	}
	if n := env.Demo.Calls(demo.SkillEngagementAnalytics); n != 0 {
		t.Fatalf("skill called %d times without its input", n)
	}

	handlerstest.WriteMemory(t, env, req.Run, orch.Step{Index: 1, TaskID: "task-1"}, "outlet_ids", `{"outlet_ids":["out-004","out-001"]}`)
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-x2", events.TypeStepRequested, req))
	it := handlerstest.Decode[orch.StepRequest](t, handlerstest.Only(t, outs, events.TypeStepIterated))
	if len(it.Turns) != 2 || it.Turns[0].ToolName != demo.SkillEngagementAnalytics || it.Turns[1].IsError {
		t.Fatalf("turns = %+v", it.Turns)
	}
	handlerstest.AssertJSON(t, it.Turns[0].ToolArgs, `{"outlet_ids":["out-004","out-001"]}`)
	if !strings.Contains(it.Turns[1].Content, `"rank":1`) {
		t.Errorf("engagement result %q has no ranks", it.Turns[1].Content)
	}

	// Several inputs are read at once; a missing one is reported by its key.
	missing := handlerstest.Tenant + ":" + handlerstest.Session + ":task-9:outlet_ids"
	req = handlerstest.ExecRequest("run-x3", 2, key, missing)
	_, err = x.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "step-x3-missing", events.TypeStepRequested, req))
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %v, want the missing input %s reported", err, missing)
	}

	// The next turn carries the inputs the first read, and reads them
	// from there, not from memory again.
	handlerstest.AssertJSON(t, it.InputData[key], `{"outlet_ids":["out-004","out-001"]}`)
	carried := it
	carried.InputData = map[string]json.RawMessage{key: json.RawMessage(`{"outlet_ids":["out-009"]}`)}
	in, err := executor.ReadInputs(handlerstest.Ctx(t), x, carried)
	if err != nil {
		t.Fatal(err)
	}
	handlerstest.AssertJSON(t, in[key], `{"outlet_ids":["out-009"]}`)

	// Inputs over MaxCarriedInputs are not carried: each turn reads them.
	big := `{"outlet_ids":["` + strings.Repeat("x", orch.MaxCarriedInputs) + `"]}`
	if c := executor.CarriedInputs(map[string]json.RawMessage{key: json.RawMessage(big)}); c != nil {
		t.Errorf("a %d-byte input was carried", len(big))
	}

	// A turn message naming data of a key that is not one of its inputs
	// is refused.
	carried.InputData = map[string]json.RawMessage{"other": json.RawMessage(`{}`)}
	if err := carried.Validate(); err == nil || !strings.Contains(err.Error(), "input_data") {
		t.Errorf("Validate = %v, want input_data refused", err)
	}
}

func TestExecutorAnswers(t *testing.T) {
	env := handlerstest.NewEnv(t)
	cases := []struct {
		name        string
		answer      string
		wantOutcome string
		wantReason  string
		wantAudit   string
		wantWritten bool
	}{
		{"valid answer", `{"status":"complete","label":"outlet_ids","data":{"outlet_ids":["out-001"]}}`,
			orch.OutcomeComplete, "", "memory.written", true},
		{"data violates the return_spec", `{"status":"complete","label":"outlet_ids","data":{"outlet_ids":"out-001"}}`,
			orch.OutcomeContractViolation, "contract violation", "contract_violation", false},
		{"data lacks a required field", `{"status":"complete","label":"outlet_ids","data":{"outlets":[]}}`,
			orch.OutcomeContractViolation, "contract violation", "contract_violation", false},
		{"no data", `{"status":"complete","label":"outlet_ids"}`,
			orch.OutcomeContractViolation, "contract violation", "contract_violation", false},
		{"insufficient", `{"status":"insufficient","reason":"needs a date range","suggestion":"ask for dates"}`,
			orch.OutcomeInsufficient, "needs a date range", "subagent.insufficient", false},
		{"failed", `{"status":"failed","reason":"skill broke","suggestion":"retry the step"}`,
			orch.OutcomeFailed, "skill broke", "", false},
		{"not a step result", `I think the outlets are fine.`,
			orch.OutcomeInvalidOutput, "stayed invalid after 2 repairs", "", false},
		{"label with a leading underscore", `{"status":"complete","label":"_outlet_ids","data":{"outlet_ids":["out-001"]}}`,
			orch.OutcomeFailed, "invalid memory label", "", false},
		{"no label", `{"status":"complete","data":{"outlet_ids":["out-001"]}}`,
			orch.OutcomeFailed, "invalid memory label", "", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := handlerstest.NewExecutor(env, handlerstest.Repeating(handlerstest.TextResp(tc.answer)), env.Toolcalls)
			req := handlerstest.ExecRequest("run-ans"+string(rune('a'+i)), 1)
			req.Run.Plan.Steps[0].TaskID = "task-ans-" + string(rune('a'+i))
			req.Run.Plan.Steps[0].ModelOnly = true // the answer comes first; grounding is TestGrounding_*'s
			outs := handlerstest.HandleTurns(t, x, handlerstest.NewEvent(t, "step-ans-"+tc.name, events.TypeStepRequested, req))
			sf := handlerstest.Finished(t, outs)
			if sf.Result.Outcome != tc.wantOutcome || !strings.Contains(sf.Result.Reason, tc.wantReason) {
				t.Fatalf("result = %+v, want %s with reason containing %q", sf.Result, tc.wantOutcome, tc.wantReason)
			}
			if tc.wantOutcome != orch.OutcomeComplete && sf.Result.Suggestion == "" {
				t.Errorf("a %s result carries no suggestion", tc.wantOutcome)
			}
			if tc.wantAudit != "" && !slices.Contains(handlerstest.AuditNames(outs), tc.wantAudit) {
				t.Errorf("audit events %v lack %s", handlerstest.AuditNames(outs), tc.wantAudit)
			}
			key := memory.MemoryScope{TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, TaskID: req.Run.Plan.Steps[0].TaskID}.Key("outlet_ids")
			_, err := env.Store.GetMemory(handlerstest.Ctx(t), key)
			switch {
			case tc.wantWritten && err != nil:
				t.Errorf("GetMemory: %v", err)
			case !tc.wantWritten && !errors.Is(err, store.ErrNotFound):
				t.Errorf("GetMemory err = %v, want nothing written (ErrNotFound)", err)
			}
			if tc.wantWritten != (sf.Result.MemoryKey != "") || tc.wantWritten != sf.Result.Validated {
				t.Errorf("memory key %q validated %v", sf.Result.MemoryKey, sf.Result.Validated)
			}
			if tc.wantOutcome == orch.OutcomeContractViolation {
				_, cv := handlerstest.AuditOf(t, outs, "contract_violation")
				if cv["step_index"] != 1.0 || cv["expected_shape"] == nil || cv["actual_shape"] == nil {
					t.Errorf("contract_violation audit = %v", cv)
				}
			}
		})
	}
}

// TestExecutorRedeliveryReusesToolResult: a redelivered turn of a call
// with side effects reuses the call's idempotency record; a read-only
// call keeps none, so its redelivery calls the skill again (which the
// demo service answers from its own record of the same key).
func TestExecutorRedeliveryReusesToolResult(t *testing.T) {
	localWrite := localWriteOutlets()
	cases := []struct {
		name   string
		skill  demo.Config
		record bool
		// wantRecall: the redelivery reaches the Skill Service again (which
		// then deduplicates by the same idempotency key).
		wantRecall bool
	}{
		{"a local write with the toolcalls bucket", localWrite, true, false},
		{"a local write without idempotency records", localWrite, false, true},
		{"a read-only call keeps no record", demo.Config{}, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := handlerstest.NewEnvWith(t, tc.skill)
			var kv jetstream.KeyValue
			if tc.record {
				kv = env.Toolcalls
			}
			x := handlerstest.NewExecutor(env, offline.New(), kv)
			ev := handlerstest.NewEvent(t, "step-redeliver", events.TypeStepRequested, handlerstest.ExecRequest("run-redeliver", 1))
			first := handlerstest.HandleStep(t, x, ev)
			second := handlerstest.HandleStep(t, x, ev)
			if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
				t.Errorf("outlet_list ran %d times, want 1", n)
			}
			if !slices.Contains(handlerstest.AuditNames(first), "skill.called") {
				t.Errorf("first delivery audit %v lacks skill.called", handlerstest.AuditNames(first))
			}
			// The demo service answers a repeated key from its record: a
			// replay there means the executor called the skill again.
			if got := len(env.Demo.Replays()) > 0; got != tc.wantRecall {
				t.Errorf("redelivery called the skill again: %v, want %v", got, tc.wantRecall)
			}
			// Either way the redelivery emits the call's audit event again
			// under the same id, so a lost first publish loses no trace.
			if !slices.Contains(handlerstest.AuditNames(second), "skill.called") {
				t.Errorf("redelivery audit %v lacks skill.called", handlerstest.AuditNames(second))
			}
			inv := env.Demo.Invocations()
			if len(inv) != 1 {
				t.Fatalf("invocations %v, want one idempotency key", inv)
			}
			for key, n := range inv {
				if n != 1 || !strings.HasPrefix(key, "run-redeliver/1/task-1/") {
					t.Errorf("invocation %q ran %d times", key, n)
				}
			}
			a := handlerstest.Only(t, first, events.TypeStepIterated)
			b := handlerstest.Only(t, second, events.TypeStepIterated)
			if a.ID() != b.ID() {
				t.Errorf("redelivery emitted step.iterated %s, first %s", b.ID(), a.ID())
			}
			ta := handlerstest.Decode[orch.StepRequest](t, a).Turns
			tb := handlerstest.Decode[orch.StepRequest](t, b).Turns
			if len(ta) != 2 || len(tb) != 2 || ta[1].Content != tb[1].Content || ta[1].IsError != tb[1].IsError {
				t.Errorf("redelivery turns differ:\n%+v\n%+v", ta, tb)
			}
		})
	}
}

// TestExecutorRedeliveredToolTurnDrawsTheCallOnce: a turn draws its
// tool call (a local write) from the budget while it looks up the call's
// idempotency record. On a redelivery the record is found and the call is not made
// again: what the redelivery drew is given back, so the ledger counts the
// call once, and when the budget has nothing left for another call the
// recorded result still wins over a budget stop.
func TestExecutorRedeliveredToolTurnDrawsTheCallOnce(t *testing.T) {
	for _, limit := range []float64{10, 1} {
		t.Run(fmt.Sprintf("tool_calls limit %g", limit), func(t *testing.T) {
			env := handlerstest.NewEnvWith(t, localWriteOutlets())
			x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
			x.Budgets = env.Budgets
			runID := fmt.Sprintf("run-draw-once-%g", limit)
			req := handlerstest.ExecRequest(runID, 1)
			req.Run.Budget.Limits = orch.Vector{orch.DimToolCalls: limit, orch.DimModelCalls: 10}
			ev := handlerstest.NewEvent(t, "step-draw-once", events.TypeStepRequested, req)
			first := handlerstest.HandleStep(t, x, ev)
			second := handlerstest.HandleStep(t, x, ev) // the redelivery: the record is there
			if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
				t.Fatalf("outlet_list ran %d times, want 1", n)
			}
			if names := handlerstest.AuditNames(second); slices.Contains(names, "budget.exhausted") {
				t.Errorf("the redelivery stopped on the budget (%v); want the recorded result", names)
			}
			for i, outs := range [][]event.Event{first, second} {
				next := handlerstest.Decode[orch.StepRequest](t, handlerstest.Only(t, outs, events.TypeStepIterated))
				if next.Spent[orch.DimToolCalls] != 1 {
					t.Errorf("delivery %d: the step reports %v spent, want one tool call", i+1, next.Spent)
				}
			}
		})
	}
}

// TestExecutorRefusedMemoryDrawLeavesNoLock: the answer's memory write is
// drawn from the budget while its key is locked. When the budget refuses
// the draw the step stops budget_exhausted, nothing is written, and the
// lock taken meanwhile is released: another task takes the key at once.
func TestExecutorRefusedMemoryDrawLeavesNoLock(t *testing.T) {
	env := handlerstest.NewEnv(t)
	x := handlerstest.NewExecutor(env, handlerstest.Repeating(handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids",
		"data": map[string]any{"outlet_ids": []string{"out-001"}}})), env.Toolcalls)
	x.Budgets = env.Budgets
	req := handlerstest.ExecRequest("run-no-write", 1)
	req.Run.Plan.Steps[0].ModelOnly = true
	req.Run.Budget.Limits = orch.Vector{orch.DimMemoryWrites: 0, orch.DimModelCalls: 10}
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-no-write", events.TypeStepRequested, req))
	if sf := handlerstest.Finished(t, outs); sf.Result.Outcome != orch.OutcomeBudgetExhausted || sf.Result.MemoryKey != "" {
		t.Fatalf("a refused memory write: %+v", sf.Result)
	}
	if d := handlerstest.ExhaustedDim(t, outs); d != string(orch.DimMemoryWrites) {
		t.Errorf("budget.exhausted on %q, want memory_writes", d)
	}
	scope := memory.MemoryScope{TenantID: req.Run.Request.TenantID, SessionID: req.Run.Request.SessionID, TaskID: "task-1"}
	key := scope.Key("outlet_ids")
	handlerstest.AssertNoMemory(t, env, key)
	if owner := handlerstest.LockOwner(t, env, key); owner != "" {
		t.Fatalf("the refused write left its key locked by %q", owner)
	}
	w := &memory.MemoryWriter{Store: env.Store, Locks: env.Locks, LockWait: time.Millisecond}
	if _, took, err := w.Lock(handlerstest.Ctx(t), key, "task-other"); err != nil || !took {
		t.Fatalf("another task's lock of the key: %v (took %v)", err, took)
	}
	if got := handlerstest.Finished(t, outs).Result.Spent[orch.DimMemoryWrites]; got != 0 {
		t.Errorf("the step reports %g memory writes, want none", got)
	}
}

func TestExecutorFailsStep(t *testing.T) {
	env := handlerstest.NewEnv(t)
	manyTurns := handlerstest.ExecRequest("run-f1", 1)
	for range 6 {
		manyTurns.Turns = append(manyTurns.Turns,
			orch.Turn{Role: "assistant", ToolCallID: "c", ToolName: demo.SkillOutletList, ToolArgs: json.RawMessage(`{}`)},
			orch.Turn{Role: "tool", ToolCallID: "c", ToolName: demo.SkillOutletList, Content: `{"outlets":[]}`})
		manyTurns.Iteration++
	}
	unknownSkill := handlerstest.ExecRequest("run-f2", 1)
	unknownSkill.Run.Plan.Steps[0].Skills = []string{"teleport"}
	cases := []struct {
		name       string
		req        orch.StepRequest
		large      int
		wantReason string
		wantCalls  int
	}{
		{"turn budget spent", manyTurns, 0, "used its 6 turns", 0},
		{"skill unavailable", unknownSkill, 0, "skill teleport unavailable", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := env.Demo.Calls(demo.SkillOutletList)
			x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
			if tc.large > 0 {
				x.LargeResponse = tc.large
			}
			sf := handlerstest.Finished(t, handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-fail-"+tc.name, events.TypeStepRequested, tc.req)))
			if sf.Result.Outcome != orch.OutcomeFailed || !strings.Contains(sf.Result.Reason, tc.wantReason) {
				t.Errorf("result = %+v, want failed with %q", sf.Result, tc.wantReason)
			}
			if n := env.Demo.Calls(demo.SkillOutletList) - before; n != tc.wantCalls {
				t.Errorf("outlet_list called %d times, want %d", n, tc.wantCalls)
			}
		})
	}
}

func TestExecutorRejects(t *testing.T) {
	env := handlerstest.NewEnv(t)
	x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
	notInPlan := handlerstest.ExecRequest("run-r1", 1)
	notInPlan.Step = 7
	cases := []struct {
		name    string
		typ     string
		data    any
		wantErr error
	}{
		{"step not in the plan", events.TypeStepRequested, notInPlan, nil},
		{"wrong type", events.TypeStepFinished, orch.StepFinished{}, events.ErrUnknownType},
		{"undecodable data", events.TypeStepIterated, []int{1}, events.ErrDecode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outs, err := x.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "bad-"+tc.name, tc.typ, tc.data))
			if err == nil || !events.IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent error", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if len(outs) != 0 {
				t.Errorf("outputs %v on error", handlerstest.Types(outs))
			}
		})
	}
}

// TestExecutorAnswerOfACarriedOutputIsStoredAfterItsResult: a step that
// runs alone, whose output the run state will carry, returns its result
// while its memory write is still in flight; the write is awaited as the
// worker awaits it (events.Deferring) and stored once it returns. A step
// that runs beside another writes before it returns.
func TestExecutorAnswerOfACarriedOutputIsStoredAfterItsResult(t *testing.T) {
	for _, beside := range []bool{false, true} {
		env := handlerstest.NewEnv(t)
		x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
		held := handlerstest.NewHeldStore(env.Store)
		x.Writer.Store = held
		req := handlerstest.ExecRequest("run-xd", 1)
		if beside {
			req.Run.Plan.Steps[1].Status, req.Run.Plan.Steps[1].TaskID = orch.StepRunning, "task-2"
		}
		outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-xd", events.TypeStepRequested, req))
		itEv := handlerstest.Only(t, outs, events.TypeStepIterated)
		ctx, wait := events.Deferring(handlerstest.Ctx(t))
		type handled struct {
			outs []event.Event
			err  error
		}
		done := make(chan handled, 1)
		go func() {
			outs, err := x.Handle(ctx, itEv)
			done <- handled{outs, err}
		}()
		key := handlerstest.Tenant + ":" + handlerstest.Session + ":task-1:outlet_ids"
		var h handled
		if beside {
			select {
			case h = <-done:
				t.Fatalf("beside another step: the hop returned before its memory write (%v)", h.err)
			case <-time.After(300 * time.Millisecond):
			}
			held.Release()
			h = <-done
			if _, err := env.Store.GetMemory(handlerstest.Ctx(t), key); err != nil {
				t.Fatalf("beside another step: no memory when the hop returned: %v", err)
			}
		} else {
			select {
			case h = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("alone: the hop waited for its memory write")
			}
			handlerstest.AssertNoMemory(t, env, key)
		}
		if h.err != nil {
			t.Fatal(h.err)
		}
		sf := handlerstest.Finished(t, h.outs)
		if sf.Result.Outcome != orch.OutcomeComplete || sf.Result.MemoryKey != key || len(sf.Result.Output) == 0 {
			t.Fatalf("result = %+v", sf.Result)
		}
		if _, written := handlerstest.AuditOf(t, h.outs, "memory.written"); written["key"] != key {
			t.Errorf("memory.written audit = %v", written)
		}
		held.Release()
		if err := wait(handlerstest.Ctx(t)); err != nil {
			t.Fatal(err)
		}
		m, err := env.Store.GetMemory(handlerstest.Ctx(t), key)
		if err != nil || m.Text != string(sf.Result.Output) {
			t.Fatalf("stored %q (%v), want the carried output %s", m.Text, err, sf.Result.Output)
		}
	}
}
