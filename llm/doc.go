// Package llm is agentbus's model layer: one chat-completion interface with
// tool calls and JSON-schema structured output, the typed inputs of the four
// model tasks (route, plan, act, synthesise), schema-checked structured
// output with bounded repair, and the offline deterministic model that lets
// agentbus run with no network and no API key.
package llm
