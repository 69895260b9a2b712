// Package domain is agentbus's vocabulary: the task types and execution
// patterns a run is routed to, the routing decision, the persona,
// conversation history and recalled memories a run carries, and the usage of its model calls.
//
// The decider (orch), the store, the model layer (llm) and the roles all
// speak it; it imports nothing of agentbus, so every one of them may
// import it and none of them has to import another for a word.
package domain
