// Package bench measures agentbus against references run side by side on
// the same machine and, where they are agentbus's own, on the same embedded
// server: the JetStream floor (a bare publish, pull and ack), agentbus
// itself under both durability modes, the executor role as 1, 2 and 4 OS
// processes against skills of 50 ms behind an MCP Skill Service, and two
// peers running the same 5-step plan: LangGraph (bench/langgraph) and the
// Restate durable-execution server with a Go SDK service (bench/restate).
// It reports ratios, because absolute figures on a shared 2-core machine
// mean little. So that the ratios hold from one run to the next, every
// throughput point is at least 10 s and hundreds of runs long (load.go),
// measured three times interleaved with the other contenders'
// (interleave.go), and reported as the median of the three with the
// lowest and highest beside it (spread.go).
package bench
