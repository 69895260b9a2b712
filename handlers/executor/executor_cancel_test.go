package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestExecutorStopsCancelledStep: a skill call in flight when its run is
// cancelled is stopped at once (its effect never happens) and the step
// finishes cancelled; a turn of a run already cancelled calls neither the
// model nor a skill.
func TestExecutorStopsCancelledStep(t *testing.T) {
	const latency = 30 * time.Second
	env := handlerstest.NewEnvWith(t, demo.Config{Latency: latency})
	calls := stepCalls{SkillCaller: env.Skills, calling: make(chan string, 8)}
	x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
	x.Skills, x.Cancels = calls, handlerstest.StartCancels(t, env)

	type handled struct {
		outs []event.Event
		err  error
	}
	done := make(chan handled, 1)
	start := time.Now()
	go func() {
		outs, err := x.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "step-xc", events.TypeStepRequested, handlerstest.ExecRequest("run-xc", 1)))
		done <- handled{outs, err}
	}()
	select {
	case name := <-calls.calling:
		if name != demo.SkillOutletList {
			t.Fatalf("called %s", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the step never called its skill")
	}
	handlerstest.WaitFor(t, "the call to reach the Skill Service", func() bool { return env.Demo.Waiting(demo.SkillOutletList) == 1 })
	handlerstest.CancelRun(t, x.Cancels, handlerstest.Tenant, "run-xc")
	var h handled
	select {
	case h = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn went on after its run was cancelled")
	}
	if h.err != nil {
		t.Fatalf("Handle: %v", h.err)
	}
	if took := time.Since(start); took >= latency/2 {
		t.Fatalf("the turn took %s: it waited for the slow skill", took)
	}
	handlerstest.CheckOutputs(t, h.outs)
	sf := handlerstest.Finished(t, h.outs)
	if sf.Result.Outcome != orch.OutcomeCancelled || sf.Result.Reason != "run cancelled by "+handlerstest.User {
		t.Errorf("step result %+v", sf.Result)
	}
	handlerstest.WaitFor(t, "the Skill Service to see the call given up", func() bool { return env.Demo.Abandoned(demo.SkillOutletList) == 1 })
	if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
		t.Errorf("outlet_list took effect %d times after the call was stopped", n)
	}

	model := llmtest.New()
	x.Model = model
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-xc-2", events.TypeStepIterated, handlerstest.ExecRequest("run-xc", 1)))
	if sf := handlerstest.Finished(t, outs); sf.Result.Outcome != orch.OutcomeCancelled {
		t.Errorf("a turn of a cancelled run ended %s", sf.Result.Outcome)
	}
	if n := len(model.Requests()); n != 0 || len(calls.calling) != 0 {
		t.Errorf("a turn of a cancelled run made %d model and %d skill calls", n, len(calls.calling))
	}
}

// stepCalls is a SkillCaller that reports every skill call as it starts.
type stepCalls struct {
	executor.SkillCaller
	calling chan string
}

func (s stepCalls) Call(ctx context.Context, tenant, name string, args json.RawMessage, key string) ([]byte, error) {
	s.calling <- name
	return s.SkillCaller.Call(ctx, tenant, name, args, key)
}
