// Package handlerstest is what the tests of the roles share: an Env (a
// real in-process NATS JetStream with the agentbus topology, the embedded
// store on it and the demo Skill Service behind a real MCP client), the
// run, step and event the tests start from, one-hop drivers of the router
// and the executor, an ingress served over HTTP with its request helpers,
// and assertions on a hop's outputs. Nothing in it is mocked; only the
// model is scripted (llmtest) or the deterministic offline one.
//
// It is imported by the external test packages of handlers/... (package
// x_test) and by handlers/internal/pipeline; a role's internal tests
// cannot import it, since it imports the roles.
package handlerstest
