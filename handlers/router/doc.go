// Package router is the router role (the manager): it runs the
// orchestration decider (orch) on every input of a run, persists its
// state, dispatches the planner and the executors, keeps sessions and
// answers the caller. It also seeds and reads the config bucket (task
// types, patterns, budget policy) a run starts from.
package router
