// Package handlers holds the logic of agentbus's roles: the router
// (manager), the planner (SubAgent-A), the executor (SubAgent-B), the
// aggregator (fan-in and the audit projection) and the ingress HTTP API.
// Each role is a struct holding its dependencies; its Handle method has
// the events.Handler shape and is registered as a method value. The
// interfaces the roles need from the store, the model and the skill
// service are declared here, by their consumer. Cancels follows the
// cancelled runs for the router, the executor and the ingress.
package handlers
