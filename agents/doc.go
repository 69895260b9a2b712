// Package agents is the tenants' agent and trigger definitions of seed 002
// (the AI Agents Service): their types, defaults and validation, their
// mapping onto the versioned store.Definition documents, and the pure
// trigger-condition evaluator with the priority ordering of matches.
//
// An Agent is a standard, supervisor or router agent with its
// instructions (the seed's systemPrompt), model settings, tool allow-list,
// handoff targets (sub_agents), turn limit and budget limits. A run that
// names an agent acts as it: RunDef is what the run records of it
// (orch.AgentDef), and the decider enforces it.
//
// A Trigger starts an agent on an inbound event when its conditions hold:
// every condition of "all" and at least one of "any" (an empty list
// holds). Match evaluates a tenant's triggers against one event and
// orders the matches by priority (lower first), then by id. Evaluation is
// pure: no I/O, no clock.
//
// Validation reports the first violation as *Error, with a stable code
// (the codes the HTTP API answers) and the JSON field it concerns. The
// seed's fields are spelled in snake_case, as the rest of the agentbus
// API is (systemPrompt is system_prompt, subAgents sub_agents ...).
//
// Nothing here does I/O; handlers serves the CRUD API over the store.
package agents
