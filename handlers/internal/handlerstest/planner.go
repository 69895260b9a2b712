package handlerstest

import (
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
)

// Recording returns the real offline model with its requests recorded.
func Recording() *llmtest.Scripted {
	m := llmtest.New()
	m.Default = offline.New()
	return m
}

// PlanRun is run runID of message planning steps, routed to
// plan-then-execute.
func PlanRun(runID, message string, steps ...orch.Step) orch.RunState {
	return orch.RunState{Request: RunRequest(runID, message), TaskType: "general", Pattern: router.PatternPlanThenExecute, Seq: 1,
		Plan: orch.Plan{PlanID: "plan-" + runID, Status: orch.PlanPlanning, Steps: steps}}
}
