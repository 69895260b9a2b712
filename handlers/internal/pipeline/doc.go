// Package pipeline holds the tests that drive whole runs through several
// roles together (router, planner, executor, aggregator, projector) on a
// real in-process NATS JetStream with the embedded store and the demo
// Skill Service: the checklist of seed 000 §12, the terminal codes, the
// patterns, gates, handoffs, sessions, budgets and quotas of a run. It
// has no code of its own. A test of one role lives in that role's package;
// what the tests share is in handlers/internal/handlerstest.
package pipeline
