// Package ingress is the HTTP API of agentbus: runs, sessions, gates and
// run controls, memory and souls, the SSE streams, plan health and
// traces, the dashboard, the definitions API of handlers/defs mounted on
// its mux, and the inbound events, posted (POST /agent/events) or
// consumed from NATS (InboundConsumer).
package ingress
