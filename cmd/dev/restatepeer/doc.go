// Command restatepeer is the Restate peer of agentbus's benchmark: the
// five-step plan of bench/langgraph/peer.py as a Restate service (Go SDK),
// in which each of the run's 12 model calls and 5 skill calls is a durable
// step (restate.Run) that the Restate server journals before the handler
// goes on. The model and the skill are fakes of zero latency, as in the
// LangGraph peer.
//
//	restatepeer [--addr 127.0.0.1:0]
//
// It serves the service endpoint (HTTP/2 cleartext) on --addr, prints
// "restatepeer listening on <addr>" on stdout once it accepts connections,
// and runs until SIGINT or SIGTERM. agentbus-dev bench registers it with the
// Restate server's admin API and invokes Pipeline/Run on the ingress.
package main
