// Package bench measures agentbus against references run side by side on
// the same machine and, where they are agentbus's own, on the same embedded
// server: the JetStream floor (a bare publish, pull and ack), agentbus
// itself under both durability modes, the executor role as 1, 2 and 4 OS
// processes against skills of 50 ms behind an MCP Skill Service, and two
// peers running the same 5-step plan: LangGraph (bench/langgraph) and the
// Restate durable-execution server with a Go SDK service (bench/restate).
// It reports ratios, because absolute figures on a shared 2-core machine
// mean little.
package bench
