// Package demo is the demo Skill Service: a small, deterministic,
// tenant-scoped skill catalog (outlets, engagement analytics, a ~1 MB menu
// and a skill private to tenant "acme") served over MCP.
//
// A Service serves the catalog over streamable HTTP at
// /tenants/{tenant}/mcp, over SSE at /tenants/{tenant}/sse, and over stdio
// for one tenant (Service.ServeStdio). Next to the skills it exposes the
// discovery tools find_relevant_skills and load_skill, so a skills.Client
// reaches it in Skill Service mode; a stock MCP client sees its tools/list.
// Every tool is annotated read-only, non-destructive, idempotent and
// closed-world, in tools/list and in load_skill's manifests alike.
//
// For fault-injection tests a Service sleeps Config.Latency in every call,
// fails the first calls of a skill (Config.FailFirst), refuses the calls
// of others with a "permission denied" tool error (Config.DenySkills),
// executes each idempotency key once and answers repeats from the recorded
// result, and reports executions and replays (Invocations, Replays, GET
// /invocations) and the calls waiting out their latency or given up by
// their caller during it (Waiting, Abandoned), so a test can wait for a
// call to be under way rather than sleep.
//
// Only the all-in-one agentbus binary (agentbus up, demo and skills) links
// this package; the role binaries reach skills through skills.Client
// alone, and a test in cmd/internal/app keeps it so.
//
// The package never logs.
package demo
