package executor

import (
	"fmt"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// clarifications tell the model what the run asked its user at its
// clarify gates and what the user answered: a step replanned after an
// answer works with it.
func (t *turn) clarifications() []llm.Message {
	var msgs []llm.Message
	for _, c := range t.req.Run.Clarifications {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser,
			Content: fmt.Sprintf("The user was asked %q and answered: %s", c.Question, c.Answer)})
	}
	return msgs
}

// resumeAfterBudget is what a step the budget stopped resumes with, once
// its run's budget gate is approved: its turns as the hop found them and
// the loop's counters, so it takes the refused turn again (a refused
// model call) without the calls this hop made being made again. turns
// and iteration, when given, are the hop's own turns so far (a refused
// tool call: the calls made before it are kept, the refused one is asked
// again by the model); iteration 0 takes the hop's input as it was.
func (t *turn) resumeAfterBudget(res *orch.StepResult, turns []orch.Turn, iteration int) {
	if res.Outcome != orch.OutcomeBudgetExhausted {
		return
	}
	if iteration == 0 {
		turns, iteration = t.req.Turns, t.req.Iteration
	}
	res.Parked = &orch.Parked{Iteration: iteration, Turns: t.compressTurns(turns), Repairs: t.req.Repairs,
		Observed: t.req.Observed + t.observed, Calls: t.callCounts(), Denied: t.req.Denied + t.deniedN,
		Steered: max(t.req.Steered, t.steered)}
}
