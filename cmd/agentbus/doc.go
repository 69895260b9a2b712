// Command agentbus is the all-in-one agentbus: `up` runs embedded NATS,
// every role, the embedded store, the demo Skill Service and the ingress in
// one process; `demo` does the same in a temporary directory, runs the demo
// task and exits; `run` is a client for a running `up`. `skills` and `nats`
// run the demo Skill Service and a nats-server alone, for multi-process
// deployments. The benchmark and the fault-injection harness are not part
// of it: they are cmd/agentbus-dev.
package main
