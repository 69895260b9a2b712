// Package skills contains the MCP skill client used by agentbus to discover,
// describe and invoke skills, and a demo Skill Service that serves a small,
// deterministic, tenant-scoped skill catalog over MCP streamable HTTP.
//
// A Skill Service exposes two discovery tools, find_relevant_skills and
// load_skill, next to the skills themselves. Every tool answers with a single
// text content item holding JSON. The tenant is part of the URL path
// (/tenants/{tenant}/mcp) and scopes the catalog: a tenant can neither see nor
// call another tenant's private skills.
//
// Client keeps one initialized MCP session per resolved URL and passes the
// caller's idempotency key in the _meta field "idempotency_key" of every skill
// call, so that a Skill Service can deduplicate retried invocations.
//
// The package never logs; failures are reported as errors wrapping the
// sentinels declared in types.go.
package skills
