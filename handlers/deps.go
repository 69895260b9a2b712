package handlers

import (
	"context"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
)

// SkillFinder is what the planner needs from the Skill Service.
type SkillFinder interface {
	Find(ctx context.Context, tenant, query string, limit int) ([]skills.Summary, error)
	Load(ctx context.Context, tenant, name string) (skills.Manifest, error)
}

// SkillCaller is what the executor needs from the Skill Service.
type SkillCaller interface {
	Load(ctx context.Context, tenant, name string) (skills.Manifest, error)
	Call(ctx context.Context, tenant, name string, args json.RawMessage, idempotencyKey string) ([]byte, error)
}

// MemoryStore reads and writes step outputs.
type MemoryStore interface {
	PutMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	GetMemory(ctx context.Context, key string) (store.Memory, error)
}

// PlanStore keeps the versioned plan projections.
type PlanStore interface {
	PutPlan(ctx context.Context, p store.Plan, version int64) error
	GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error)
}

// EventStore appends audit events; the same event id is stored once.
type EventStore interface {
	AppendEvents(ctx context.Context, evs []store.Event) error
	Trace(ctx context.Context, q store.TraceQuery) ([]store.Event, error)
}

// RouterStore is what the router needs: the step outputs it synthesises
// from, the tenants' souls and the agent definitions runs act as. It
// writes nothing.
type RouterStore interface {
	GetMemory(ctx context.Context, key string) (store.Memory, error)
	// SoulFor is the soul a run of userID sees: the user's, else the
	// tenant's.
	SoulFor(ctx context.Context, tenantID, userID string) (store.Soul, error)
	GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error)
	DefinitionReader
}

// DefinitionReader reads one of a tenant's agent, trigger or tool
// definitions.
type DefinitionReader interface {
	GetDefinition(ctx context.Context, tenantID, kind, id string) (store.Definition, error)
}

// DefinitionStore keeps the tenants' versioned definitions: a write or a
// delete names the version it expects (store.ErrConflict otherwise).
type DefinitionStore interface {
	DefinitionReader
	PutDefinition(ctx context.Context, d store.Definition, expected int64) error
	ListDefinitions(ctx context.Context, tenantID, kind string) ([]store.Definition, error)
	DeleteDefinition(ctx context.Context, tenantID, kind, id string, expected int64) error
}

// ProjectionStore is what the projector writes: audit events, plan and
// session projections, and the exchanges kept in users' memory.
type ProjectionStore interface {
	EventStore
	PutPlan(ctx context.Context, p store.Plan, version int64) error
	PutSession(ctx context.Context, s store.Session) error
	PutMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	// PutExecution writes a run's execution record, replacing the one
	// of the same run.
	PutExecution(ctx context.Context, e store.Execution) error
}
