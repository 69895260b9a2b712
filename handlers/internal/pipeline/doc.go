// Package pipeline holds the tests that drive the roles together through
// whole runs, on a real in-process NATS JetStream with the embedded store
// and the demo Skill Service. It has no code of its own.
package pipeline
