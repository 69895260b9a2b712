// Package events defines how agentbus talks on NATS JetStream: the
// CloudEvents envelope and its binary-mode NATS binding, the event types and
// readable subjects (agent.<noun>.<verb>.<tenant>), the JSON payloads that
// carry a run's state from role to role, the idempotent bootstrap of streams,
// consumers and KV buckets, and the consume → handle → publish → ack runtime
// every role runs on.
//
// The package never logs. Errors are returned, and the runtime reports the
// ones it cannot return through Config.OnError.
package events
