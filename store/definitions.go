package store

import (
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// IndexDefinitions holds Definition documents: the tenants' agent,
// trigger and tool definitions (seed 002).
const IndexDefinitions = "agent_definitions"

// Definition kinds accepted by the agent_definitions schema.
const (
	// KindAgent is an agent definition.
	KindAgent = "agent"
	// KindTrigger is a trigger definition.
	KindTrigger = "trigger"
	// KindTool is a tool definition.
	KindTool = "tool"
	// KindSkill is a skill definition (seed 002 Skills pattern).
	KindSkill = "skill"
)

// MaxListDefinitions bounds what ListDefinitions returns: the first
// MaxListDefinitions definitions of a kind by id.
const MaxListDefinitions = 1000

// Definition is a document of the agent_definitions index: one versioned
// definition (an agent, a trigger or a tool) of one tenant. The store
// keeps the envelope (identity, name, status, version, times) queryable
// and Spec, the kind's own fields, as an opaque JSON object: the package
// that owns the kind (agents) validates it before it is stored.
//
// (TenantID, Kind, ID) is the document identity. Version starts at 1 and
// grows by one with every update: it is the optimistic-concurrency token
// of PutDefinition and DeleteDefinition.
type Definition struct {
	TenantID  string          `json:"tenant_id"`
	Kind      string          `json:"kind"`
	ID        string          `json:"id"`
	Name      string          `json:"name,omitempty"`
	Status    string          `json:"status,omitempty"`
	Version   int64           `json:"version"`
	Spec      json.RawMessage `json:"spec"`
	CreatedAt time.Time       `json:"created_at,omitzero"`
	UpdatedAt time.Time       `json:"updated_at,omitzero"`
}
