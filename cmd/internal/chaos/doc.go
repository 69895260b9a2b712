// Package chaos is agentbus's fault-injection harness. It runs the real
// multi-process deployment (nats-server, or a cluster of three, the demo
// Skill Service and the five role binaries as OS processes), submits runs
// while it kills, stops and restarts processes at random moments (and, in
// the continuous broker-outage mode, takes a broker down every few
// seconds for the whole run), and then checks that no run was lost, no
// skill side effect happened twice and every answer equals the
// fault-free reference answer.
package chaos
