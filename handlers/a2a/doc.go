// Package a2a serves Agent2Agent (A2A 0.3, its JSON-RPC binding) over
// agentbus runs: an agent card per active agent of a tenant and one for
// the default router, and the methods message/send, message/stream,
// tasks/get, tasks/cancel and tasks/resubscribe, a run being a task.
// Mounted on the ingress as an ingress.Adapter.
package a2a
