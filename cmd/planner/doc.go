// Command planner runs agentbus's planner (SubAgent-A): it discovers skills
// over MCP and writes verified plans. Run any number of copies against one
// NATS; they share the work.
package main
