// Package skills contains the MCP skill client used by agentbus to discover,
// describe and invoke skills, the protocol values a Skill Service shares
// with it, and the schema derivation used to chain skills. The demo Skill
// Service lives in package skills/demo, which the role binaries do not
// link.
//
// The client reaches skills in one of two modes (Config.Mode):
//
//   - Skill Service mode. The server exposes two discovery tools,
//     find_relevant_skills and load_skill, next to the skills themselves;
//     every tool answers with a single text content item holding JSON.
//   - Plain mode. Any MCP server's tools/list is the catalog: Find ranks the
//     tools locally by word relevance to the query, Load builds a Manifest
//     from a tool's input schema and its output schema (or, when it declares
//     none, TextOutputSchema), and Call returns a JSON object matching it.
//
// ModeAuto (the default) picks Skill Service mode when tools/list holds both
// discovery tools. A session's tools/list is cached for Config.ToolsTTL.
//
// Transports (Config.Transport) are streamable HTTP (the default), the
// legacy HTTP+SSE transport, and stdio, which launches Config.Command. On
// the HTTP transports the tenant is part of the URL ("{tenant}" in
// Config.URL, e.g. /tenants/{tenant}/mcp) and scopes the catalog: a tenant
// can neither see nor call another tenant's private skills. A stdio server
// is single-scope: one process serves every tenant. Tenant ids are always
// validated.
//
// The X-Api-Key header is set per request: the key of the call's context
// (WithAPIKey) or else Config.APIKey, so one Client serves many callers. No
// error includes a key.
//
// The client keeps one initialized MCP session per resolved URL (on SSE, per
// URL and API key; on stdio, one process) and passes the caller's
// idempotency key in the _meta field "idempotency_key" of every skill call,
// so that a Skill Service can deduplicate retried invocations.
//
// Manifests carry the tool's MCP annotations (Manifest.Annotations), which
// Manifest.ReadOnly, Destructive and OpenWorld interpret. A Skill Service
// that refuses the caller (HTTP 401 or 403, or a "permission denied" tool
// error) yields ErrPermissionDenied.
//
// A server's question to the user during a call (elicitation) is answered
// by the call's Elicitor (WithElicitor) from the answers it holds; one it
// has none for fails the call with an ElicitationError, so that the caller
// can ask the user and make the call again (see elicit.go).
//
// A result's images, audio and embedded resources are never returned
// inline: Call describes them as Attachments, their data put in the
// Config.Attachments store and named by reference. Config.MaxResultBytes
// caps a result's text and each attachment (ErrResultTooLarge).
//
// The package never logs; failures are reported as errors wrapping the
// sentinels declared in types.go.
package skills
