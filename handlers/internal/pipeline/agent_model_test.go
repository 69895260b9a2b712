package pipeline

import (
	"slices"
	"testing"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// TestAgentSettingsReachEveryModelCallOfItsRun: a run acting as an agent
// sends the agent's model, temperature, max_tokens, top_p and stop
// sequences with its planner's, executor's and aggregator's calls; a run
// acting as no agent sends none of them.
func TestAgentSettingsReachEveryModelCallOfItsRun(t *testing.T) {
	wholeRun(t)
	temp, topP := 0.4, 0.9
	for _, agent := range []string{"agent-tuned", ""} {
		// A fresh environment each: both runs are of the test session,
		// whose next run would continue as its current agent.
		env := handlerstest.NewEnv(t)
		handlerstest.PutAgent(t, env, "agent-tuned", func(s *agents.AgentSpec) {
			s.Model = "claude-tuned"
			s.ModelConfig = agents.ModelConfig{Temperature: &temp, MaxTokens: 640, TopP: &topP, StopSequences: []string{"###"}}
			s.Limits = nil
			s.MaxTurns = 0
		})
		f := newFlow(t, env, env.Store)
		m := handlerstest.Recording()
		f.router.Model, f.planner.Model, f.exec.Model = m, m, m
		ev := runEvent(t, "run-settings-"+agent, false)
		if agent != "" {
			ev = handlerstest.AgentRunRequested(t, "run-settings-agent", agent)
		}
		res, _ := f.drive(t, ev)
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("agent %q: run ended %s: %s", agent, res.TerminalCode, res.Reason)
		}
		for _, task := range []llm.Task{llm.TaskPlan, llm.TaskAct, llm.TaskSynthesize} {
			reqs := m.Requests(task)
			if len(reqs) == 0 {
				t.Fatalf("agent %q: no %s call", agent, task)
			}
			for _, r := range reqs {
				if agent == "" {
					if r.Model != "" || r.Temperature != nil || r.TopP != nil || r.Stop != nil {
						t.Errorf("no agent: %s request carries settings %+v", task, r)
					}
					continue
				}
				if r.Model != "claude-tuned" || r.Temperature == nil || *r.Temperature != 0.4 || r.TopP == nil || *r.TopP != 0.9 ||
					!slices.Equal(r.Stop, []string{"###"}) || r.MaxTokens == 0 || r.MaxTokens > 640 {
					t.Errorf("agent: %s request model %q temperature %v top_p %v stop %v max_tokens %d", task, r.Model, r.Temperature, r.TopP, r.Stop, r.MaxTokens)
				}
			}
		}
	}
}
