// Package planner is the planner role (SubAgent-A): it proposes a run's
// plan (plan-then-execute) or its lanes (supervisor) with the model, and
// verifies a proposed plan against the skills it names.
package planner
