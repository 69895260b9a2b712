// Package opensearch is the OpenSearch storage backend of agentbus, built
// on opensearch-go/v4. It passes the same contract suite as the embedded
// backend (store/storetest) and is meant for production and scale.
//
// New validates the Config, connects and runs EnsureIndices, which creates
// (idempotently, from any number of processes) the layout below, every
// name carrying Config.IndexPrefix:
//
//   - agent_memory, agent_plans, agent_souls, agent_sessions,
//     agent_definitions: one index each, with the seed's mappings and "dynamic": "strict" (see Mapping).
//     agent_memory has index.knn and an HNSW knn_vector "embedding" of
//     Config.Dimension dimensions, engine lucene (or faiss), cosine space.
//   - agent_events: a write alias over rolling backing indices
//     agent_events-000001, -000002, ..., which an index template gives the
//     same strict mapping.
//   - with the Index State Management plugin (Config.ISM): the policy
//     agent_events-retention, which rolls the write index over daily and
//     deletes a backing index Config.EventRetention after its rollover
//     (RetentionPolicy).
//   - agent_executions: a read alias over one index per UTC day of the
//     records' created_at, agent_executions-YYYY.MM.DD, created from an
//     index template (today's by New, a new day's on its first write);
//     with ISM the policy agent_executions-ttl deletes a day index
//     Config.ExecutionTTL + 1 day after its creation (ExecutionPolicy).
//     Reads hide records older than ExecutionTTL.
//
// Existing indices get the current mapping on every New, so added fields
// appear and an incompatible change (another dimension) fails loudly.
//
// Documents and their semantics:
//
//   - Definitions (agents, triggers, tools): _id from tenant, kind and id.
//     A write reads the stored document and sends its seq_no and primary
//     term back (if_seq_no/if_primary_term), so the version check and the
//     write are one atomic step; a 409 is store.ErrConflict. Lists are a
//     search (the writes wait for the refresh).
//   - Memory: _id is the memory key. A non-zero Version is sent as
//     if_seq_no/if_primary_term; a 409 is store.ErrConflict. CreateMemory
//     uses op_type=create. QueryMemory is a knn query whose filter holds the
//     tenant (and scope and user): efficient filtering, so another tenant's
//     vectors never take a place in the top k. Scores are exact cosine
//     similarities recomputed from the returned embeddings.
//   - Plans: _id is the plan id, written with version_type=external and
//     version = the projection's sequence, so OpenSearch keeps the newest;
//     a refused older write is store.ErrStale (identical content at the
//     stored version succeeds). Health is a terms aggregation on status and
//     a sum of replan_count.
//   - Events: one bulk request per AppendEvents through the alias, _id =
//     event id, op_type create, routing = tenant id. Every item is checked:
//     409 means already stored, anything else fails the call (*BulkError).
//     Trace sorts by ts, backing index and _seq_no (append order, since a
//     tenant's events share a shard), pages with search_after, removes
//     duplicates across backing indices and finally orders by full
//     precision ts (OpenSearch dates are milliseconds). Events is a bool
//     query of filter clauses (tenant, event types, skill, a ts range
//     widened to whole milliseconds, large_response) routed by tenant,
//     sorted by ts descending then event_id; it pages until no later hit
//     can enter the result, re-checks every hit at full precision and
//     orders by full-precision ts.
//   - Souls (_id from tenant and user) and sessions (_id = session id).
//
// Every write validates its document with store.Validate before any
// request. Writes that searches must see (memory, plans, events) use
// refresh=wait_for, in tests too: Config.RefreshInterval shortens the wait.
// Souls and sessions are only read by id, which is real-time.
//
// Differences from the embedded backend, all inherent to a fixed knn
// mapping or to OpenSearch limits: an embedding whose length is not
// Config.Dimension, or that is all zeros, is refused with a
// *store.SchemaError on /embedding (the embedded store accepts and never
// matches it); document ids are limited to 512 bytes
// (store.ErrInvalidArgument).
//
// Authentication: basic (Username/Password), TLS (CAFile,
// InsecureSkipVerify) or AWS SigV4 (Config.AWS, default credential chain).
// SigV4 with service "es" targets Amazon OpenSearch Service domains.
// Service "aoss" (OpenSearch Serverless) signs correctly but is untested:
// serverless collections have no ISM (use ISMDisabled) and restrict
// operations this backend relies on (refresh control, and depending on the
// collection type custom document ids and versioning), so the contract is
// not known to hold there.
//
// Development and CI run a real single node started by
// deploy/opensearch/run.sh (the integration-test distribution and the k-NN
// plugin from Maven Central). It has no ISM plugin, which Maven Central
// does not publish, so there the store runs without retention
// (ISMEnabled is false), and the k-NN plugin from Maven has no native
// libraries, so only the lucene engine works on it.
package opensearch
