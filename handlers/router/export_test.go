package router

import (
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// LoadPatterns reads the pattern definitions as a run's configuration
// does, for the external tests.
var LoadPatterns = loadPatterns

// Current is the follower's configuration, for the external tests.
func (f *ConfigFollower) Current() ([]llm.TaskType, []llm.Pattern, orch.BudgetPolicy, error) {
	rc, err := f.current()
	return rc.taskTypes, rc.patterns, rc.policy, err
}
