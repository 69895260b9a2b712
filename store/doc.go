// Package store defines the persistent document model of agentbus and the
// backend-neutral pieces every storage backend shares.
//
// The document types (Memory, Plan, Event, Soul, Session, Definition,
// Execution) mirror the OpenSearch index mappings agent_memory,
// agent_plans, agent_events, agent_souls, agent_sessions,
// agent_definitions and agent_executions field
// for field, because those indexes are created with "dynamic": "strict"
// and reject unknown fields. Optional
// fields are omitted from JSON when empty; required timestamps use omitzero
// so that a zero time is reported as a missing field rather than stored as
// year 1.
//
// Validate checks a document against the embedded JSON Schema of its index
// before any backend is touched; violations are reported as *SchemaError,
// which also matches ErrSchema under errors.Is. The schemas are the
// specification, and untyped documents (json.RawMessage, maps) are
// validated against them, and so is a Definition; the other document
// types above, which agentbus builds on every hop, are checked by equivalent Go code (check.go) with the same
// verdicts and errors, a test comparing the two on generated documents.
//
// Definition is the versioned envelope of the tenants' agent, trigger and
// tool definitions: the package agents owns each kind's fields (Spec) and
// validates them; the store checks the envelope, and its version is the
// optimistic-concurrency token of every write.
//
// The package also provides the sentinel errors shared by all backends
// (ErrNotFound, ErrConflict, ErrStale, ErrInvalidArgument), the query and
// aggregation types, and an offline deterministic Embedder (HashEmbedder)
// together with Cosine similarity.
//
// Backends live in sub-packages (store/embedded for JetStream); the
// storetest package holds the contract suite every backend must pass.
package store
