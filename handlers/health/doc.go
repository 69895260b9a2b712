// Package health computes a tenant's plan health (success rate, replan
// exhaustion, contract violations, latencies) from its audit events.
package health
