package handlers

import (
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// AgentModel returns m sending the model settings of the agent a run acts
// as (its model name, temperature, max_tokens, top_p and stop sequences,
// as recorded in the run's state) with every call: the planner's, the
// executor's and the aggregator's. A run acting as no agent gets m. Which
// model id goes out is the provider's choice (llm.ProviderConfig's
// ResolveModel): the agent's model when the deployment serves it.
func AgentModel(m llm.Model, a *orch.AgentDef) llm.Model {
	if a == nil {
		return m
	}
	s := a.ModelSettings
	return llm.WithSettings(m, llm.Settings{Model: a.Model, Temperature: s.Temperature, MaxTokens: s.MaxTokens, TopP: s.TopP, Stop: s.StopSequences})
}
