// Command agentbus is the all-in-one agentbus: `up` runs embedded NATS,
// every role, the embedded store, the demo Skill Service and the ingress in
// one process; `demo` does the same in a temporary directory, runs the demo
// task and exits; `run` is a client for a running `up`. `skills` and `nats`
// run the demo Skill Service and a nats-server alone, for multi-process
// deployments; `chaos` injects faults into one and checks nothing is lost.
package main
