// Command router runs agentbus's router, the manager role: it routes each
// task to a pattern, dispatches plan steps, replans failed ones,
// synthesises the answer and ends every run with one terminal code. Run any
// number of copies against one NATS; they share the work.
package main
