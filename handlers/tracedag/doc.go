// Package tracedag folds a run's ordered trace into its provenance graph
// (seed 001): what GET /agent/plans/{plan_id}/trace?view=dag answers.
package tracedag
