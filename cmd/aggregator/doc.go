// Command aggregator runs agentbus's fan-in of step results per group and
// the projection of audit events into the store. Run any number of copies
// against one NATS; they share the work.
package main
