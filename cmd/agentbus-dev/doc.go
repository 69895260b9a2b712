// Command agentbus-dev holds what measures and tests agentbus rather than
// runs it: `bench` (make bench) measures agentbus beside the JetStream
// floor, LangGraph and Restate, and with executors as 1, 2 and 4 processes;
// `syncprobe` measures how many synced publishes the server acknowledges as
// they spread over more streams (what sharding would buy at equal
// durability);
// `chaos` (make chaos) injects faults into the multi-process deployment and
// checks that no run is lost or done twice. Neither is linked into the
// binaries a deployment runs (cmd/agentbus and the role binaries).
package main
