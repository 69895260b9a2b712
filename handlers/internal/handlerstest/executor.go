package handlerstest

import (
	"slices"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
)

// ExecRequest is a dispatched step: step idx of the two-step plan, running.
func ExecRequest(runID string, idx int, inputs ...string) orch.StepRequest {
	steps := TwoSteps()
	steps[0].Status, steps[0].TaskID = orch.StepRunning, "task-1"
	if idx == 2 {
		steps[0].Status, steps[0].MemoryKey, steps[0].Validated = orch.StepComplete, "", true
		steps[1].Status, steps[1].TaskID = orch.StepRunning, "task-2"
	}
	run := PlanRun(runID, RankTask, steps...)
	run.Plan.Status, run.Seq = orch.PlanExecuting, 2
	return orch.StepRequest{Run: run, Step: idx, Group: orch.Group{ID: "grp-" + runID, Expected: 1}, Inputs: inputs}
}

// NewExecutor is an executor on env with model, writing its idempotency
// records of tool calls to toolcalls.
func NewExecutor(env *Env, model llm.Model, toolcalls jetstream.KeyValue) *executor.Executor {
	return executor.NewExecutor(model, env.Skills, env.Store, env.Locks, toolcalls, NopLog)
}

// HandleStep handles one executor hop, failing t on an error, and checks
// its outputs.
func HandleStep(t *testing.T, x *executor.Executor, ev event.Event) []event.Event {
	t.Helper()
	outs, err := x.Handle(Ctx(t), ev)
	if err != nil {
		t.Fatalf("Handle %s: %v", ev.Type(), err)
	}
	CheckOutputs(t, outs)
	return outs
}

// HandleTurns handles ev, then every step.iterated it leads to, and
// returns the outputs of the last hop.
func HandleTurns(t *testing.T, x *executor.Executor, ev event.Event) []event.Event {
	t.Helper()
	outs := HandleStep(t, x, ev)
	for range x.MaxTurns {
		next := OfType(outs, events.TypeStepIterated)
		if len(next) == 0 {
			break
		}
		outs = HandleStep(t, x, next[0])
	}
	return outs
}

// Repeating is a model that answers every request with resp.
func Repeating(resp llm.Response) *llmtest.Scripted {
	m := llmtest.Sequence(resp)
	m.Repeat = true
	return m
}

// Finished returns the step's result: from step.finished, or from the
// step.joined a group of one emits in its place.
func Finished(t *testing.T, outs []event.Event) orch.StepFinished {
	t.Helper()
	var sf orch.StepFinished
	if joins := OfType(outs, events.TypeStepJoined); len(joins) > 0 {
		j := Decode[orch.StepJoined](t, Only(t, outs, events.TypeStepJoined))
		if n := len(OfType(outs, events.TypeStepFinished)); n != 0 || j.Group.Expected != 1 {
			t.Fatalf("step.joined of a group of %d next to %d step.finished", j.Group.Expected, n)
		}
		sf = orch.StepFinished(j)
	} else {
		sf = Decode[orch.StepFinished](t, Only(t, outs, events.TypeStepFinished))
	}
	if n := len(OfType(outs, events.TypeStepIterated)); n != 0 {
		t.Errorf("got %d step.iterated next to step.finished", n)
	}
	if !slices.Contains(AuditNames(outs), "subagent.finish") {
		t.Errorf("audit events %v lack subagent.finish", AuditNames(outs))
	}
	return sf
}

// AssertJSON fails t unless got is the JSON value want.
func AssertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want: %s", want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("JSON = %s, want %s", gb, wb)
	}
}

// UngateModes makes x follow env's config bucket with the tenants'
// approval_gates relaxed to none ({"*": []}): only a destructive call
// waits at a gate. It is for the tests of what a network or delegated
// call does once it is made.
func UngateModes(t *testing.T, env *Env, x *executor.Executor) {
	t.Helper()
	if _, err := env.Config.Put(Ctx(t), runctl.ConfigKeyApprovalGates, []byte(`{"*":[]}`)); err != nil {
		t.Fatal(err)
	}
	x.Modes = runctl.NewApprovalModes(env.Config)
	if err := x.Modes.Start(Ctx(t)); err != nil {
		t.Fatal(err)
	}
}
