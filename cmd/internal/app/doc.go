// Package app wires agentbus processes: configuration from flags and
// environment, logging, the NATS connection, the store, the skill client,
// the model, and running a role's worker until SIGTERM. Every main in cmd/
// is a few lines on top of it.
package app
