// Package eventstest starts real, in-process NATS JetStream servers for
// tests. agentbus never mocks its broker.
package eventstest
