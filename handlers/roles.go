package handlers

import (
	"time"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
)

// Role names: each is the durable consumer its processes share.
const (
	RoleRouter     = "router"
	RolePlanner    = "planner"
	RoleExecutor   = "executor"
	RoleAggregator = "aggregator"
	// RoleProjector writes the store's projections from the audit trails
	// the messages of the AGENT stream carry.
	RoleProjector = "projector"
	// RoleInbound consumes the inbound events published on
	// agent.inbound.<tenant> (InboundConsumer); the ingress hosts it.
	RoleInbound = "inbound"
)

// InboundSubjectRoot is the subject root of inbound events: a service
// outside agentbus (the conversations service) publishes a tenant's
// event, the JSON body POST /agent/events takes, on
// agent.inbound.<tenant>. The AGENT stream stores it.
const InboundSubjectRoot = "agent.inbound"

// InboundSubject is the subject of tenant's inbound events.
func InboundSubject(tenant string) string { return InboundSubjectRoot + "." + tenant }

// InboundConsumer is the inbound role's durable consumer. Its deliveries
// are unlimited: an event the request limits refuse waits (redelivered
// after their Retry-After) instead of running out of deliveries; a
// malformed one is dead-lettered at once.
var InboundConsumer = events.Consumer{Name: RoleInbound, Stream: events.StreamAgent,
	Filters: []string{InboundSubjectRoot + ".*"}, Unlimited: true}

// KV bucket names.
const (
	BucketFanin     = "fanin"
	BucketLocks     = "locks"
	BucketConfig    = "config"
	BucketToolcalls = "toolcalls"
	// BucketCredentials holds each run's forwarded API key, by run id, so
	// the key never travels in an event. Entries expire after a day and
	// the router deletes them when the run ends.
	BucketCredentials = "credentials"
	// BucketSessions holds each session's bounded conversation, by tenant
	// and session (see Sessions). A session idle for 30 days expires.
	BucketSessions = "sessions"
	// BucketCancels holds the cancelled runs, keyed <tenant>.<run_id>
	// (see Cancels), as long as the runs' events are kept.
	BucketCancels = "cancels"
	// BucketToolSecrets holds the webhook tools' secrets, sealed with
	// AES-256-GCM (tools.Secrets), keyed <tenant>.<tool_id>.
	BucketToolSecrets = "tool_secrets"
)

// Buckets are the KV buckets the roles use.
var Buckets = []events.Bucket{
	{Name: BucketFanin, TTL: events.KeepWithRuns},
	{Name: BucketLocks, TTL: 10 * time.Minute}, // the locks of a run that died before its router read them
	{Name: BucketConfig, History: 5},
	{Name: BucketToolcalls, TTL: events.KeepWithRuns},
	{Name: BucketCredentials, TTL: 24 * time.Hour},
	{Name: BucketSessions, TTL: 30 * 24 * time.Hour},
	{Name: BucketCancels, TTL: events.KeepWithRuns},
	{Name: ledger.BucketBudgets, TTL: events.KeepWithRuns},
	{Name: runctl.BucketGates, TTL: events.KeepWithRuns},
	{Name: BucketAlerts},
	{Name: BucketToolSecrets},
	{Name: ledger.BucketLimits, TTL: 24 * time.Hour},
	{Name: ledger.BucketQuotas, TTL: ledger.QuotaEntryTTL},
	{Name: ledger.BucketCircuits, TTL: time.Hour},
	{Name: runctl.BucketSessionRuns, TTL: events.KeepWithRuns},
}

// RoleMonitor evaluates alert rules.
const RoleMonitor = "monitor"

// BucketAlerts holds each tenant's alert states, keyed <tenant>.<rule>.
const BucketAlerts = "alerts"
