// Package llm is agentbus's model layer: one chat-completion interface with
// tool calls, JSON-schema structured output and token streaming; the typed
// inputs of the model tasks (route, plan, act, synthesise, extract); the
// versioned system prompts (prompts/<task>.v<N>.md, embedded); schema-checked
// structured output with bounded repair; and the wrappers every provider
// goes through: Metered (latency, call count, cost from a price table),
// Fallback (to the offline model when a provider is unavailable) and
// Recorder (the per-hop record of every call, for model.called audit events
// and the run's usage totals).
//
// Providers live in subpackages: offline (the deterministic default),
// openai (any OpenAI-compatible server) and anthropic (the Anthropic API and
// Bedrock); provider opens one from a "provider:model" spec.
package llm
