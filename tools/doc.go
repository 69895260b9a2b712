// Package tools runs the tools an agent's runs may call besides the MCP
// skills (seed 002): the built-in system tools (send_message,
// end_conversation, trigger_flow, set_context, get_context) and the
// tenants' webhook tools, signed with a per-tool secret kept encrypted.
//
// Layer wraps the Skill Service client: it answers Find, Load and Call
// for those tools and delegates every other name, so the planner
// discovers them and the executor's allow-list, approval and idempotency
// logic applies to them unchanged.
package tools
