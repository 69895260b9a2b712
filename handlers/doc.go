// Package handlers is the vocabulary the roles share: the role names and
// the KV buckets and object stores they use (Buckets, ObjectStores), the
// outbox a hop collects its outputs and audit events in, the model-call
// plumbing (reply streams, usage records, failures), the audit names and
// payloads two roles exchange (the plan projection, the queued run, the
// alert trigger), the agent definitions a run acts as, attachments, the
// logging middleware and the HTTP API's answers (WriteJSON, WriteError).
// The roles live in the packages below it: router, planner, executor,
// aggregator, projector, monitor and the ingress HTTP API (with the
// definitions API in defs); the run controls in runctl, the ledgers in
// ledger, step memory in memory and plan health in health. Each role is a
// struct holding its dependencies; its Handle method has the
// events.Handler shape and is registered as a method value.
package handlers
