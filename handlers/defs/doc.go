// Package defs is the definitions API (seed 002), served by the ingress
// on its mux and behind its authentication: the tenant's agents at
// /agent/agents, triggers at /agent/triggers, tools at /agent/tools and
// skills at /agent/skills, each created with POST, listed and read with
// GET, replaced with PUT and deleted with DELETE. Every route is scoped to
// the caller's tenant; another tenant's definition is not found, exactly
// like a missing one. The ingress's POST /agent/events runs the tenant's
// triggers (Triggers) on an inbound event.
//
// Definitions are versioned: each write bumps version, answered in the
// body and as the ETag. A PUT names the version it replaces, in If-Match
// or as "version" in the body (428 version_required without either); a
// stale one is 409 version_conflict, so two editors never overwrite each
// other. A DELETE may name it too.
package defs
