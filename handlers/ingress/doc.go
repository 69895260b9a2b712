// Package ingress is the HTTP API of agentbus: runs, sessions, gates and
// run controls, definitions (agents, triggers, tools), memory and souls,
// the SSE streams, plan health and traces, the dashboard, and the inbound
// events consumed from NATS (InboundConsumer).
package ingress
