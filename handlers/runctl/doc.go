// Package runctl holds the run controls kept on NATS KV: cancels,
// interrupts and steering messages (Cancels), gates and approval records
// (Gates), approval modes, sessions and the queue of a session's runs
// (Sessions, SessionRuns), forwarded credentials, and the replay of a
// recorded run against them (ReplayRun).
package runctl
