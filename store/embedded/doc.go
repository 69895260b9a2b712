// Package embedded is the zero-setup storage backend of agentbus, built on
// NATS JetStream so that it needs nothing but the broker agentbus already
// uses.
//
// New creates (idempotently) six key-value buckets, store_memory,
// store_plans, store_souls, store_sessions, store_definitions and
// store_executions (whose TTL is Config.ExecutionTTL), and one stream,
// STORE_EVENTS (subjects store.events.>, kept Config.EventRetention), all
// with file storage. Data is
// therefore durable across process restarts, and every process connected
// to the same NATS system shares it.
//
// Layout:
//
//   - Memory documents are stored under their key's ":"-separated parts,
//     each escaped, joined with "." ("tenant.session.task.label"), so a
//     recall reads a tenant's, a user's or a session's memories by a
//     key prefix; the KV revision is the document's Version.SeqNo
//     (PrimaryTerm is always 1). New moves a memory an earlier version
//     stored under its whole escaped key.
//   - Plans are stored under the escaped plan id in an envelope holding the
//     caller-supplied external version next to the document.
//   - Souls are stored under "<tenant>.<user>" ("_" for no user), sessions
//     under the escaped session id.
//   - Definitions (agents, triggers, tools) are stored under
//     "<tenant>.<kind>.<id>"; their version check and write are one
//     conditional update on the KV revision read.
//   - Execution records are stored under "<tenant>.<execution id>"; the
//     bucket's TTL deletes them, and reads hide any older than it.
//   - Events are messages on store.events.<tenant>.<session> ("_" for no
//     session) with Nats-Msg-Id set to the event id.
//
// Keys and subject tokens are escaped reversibly: ASCII letters, digits
// and '-' are kept, every other byte becomes "_XX" (upper-case hex), so
// agentbus keys such as "tenant:session:task:label" are valid KV keys and
// the placeholder "_" can never collide with an escaped value.
//
// Similarity search (QueryMemory) scans the whole bucket unless it is a
// recall within scopes (one batched read of their prefixes), Health and
// PruneMemory scan the whole bucket, and
// Events reads every event of the tenant; they are meant for development
// and small deployments; the OpenSearch backend is
// the scalable one. All methods are safe for concurrent use.
package embedded
