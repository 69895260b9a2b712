// Package orch is the run decider: the domain model of a run (request,
// plan, steps, states, terminal codes, usage) and the pure function that
// orchestrates it, Decide(state, input) → decision.
//
// Decide does no I/O: no NATS, no store, no clock (each input carries its
// time) and no randomness (plan, group and task ids derive from the run
// id). The router is a thin adapter that decodes a message, does the model
// calls a decision needs and publishes the decision. Because every decision
// is a function of the run's recorded inputs, a run can be replayed by
// folding Decide over them, and the orchestration is tested without a
// broker (decide_test.go, and property_test.go, which delivers messages in
// random order with random redeliveries).
package orch
