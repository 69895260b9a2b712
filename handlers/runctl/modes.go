package runctl

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/skills"
)

// ConfigKeyApprovalModes holds the tenants' approval-mode overrides in the
// config bucket: {"<tenant>": {"<skill>": "<mode>"}}, with "*" for every
// tenant (a tenant's own entry wins).
const ConfigKeyApprovalModes = "approval_modes"

// ConfigKeyApprovalGates holds which approval modes go through a gate
// (propose, approve, execute), per tenant: {"<tenant>": ["network",
// "delegated"]}, with "*" for every tenant (a tenant's own entry wins).
// A tenant with neither entry has DefaultGatedModes; an empty list gates
// no mode but destructive, which is always gated, whatever it says.
const ConfigKeyApprovalGates = "approval_gates"

// DefaultGatedModes are the modes gated for a tenant that approval_gates
// does not name (seed 004's matrix): a call that reaches another system
// (network) or acts for the user there (delegated) is proposed, approved,
// then executed. A tenant's policy, or the agent a run acts as
// (orch.AgentDef.AutoApprove), relaxes it.
var DefaultGatedModes = []string{skills.ModeNetwork, skills.ModeDelegated}

// ApprovalModes gives each skill call its approval mode (seed 004): the
// tenant's override from the config bucket if there is one, else the
// skill's own (skills.Manifest.ApprovalMode). Once started it follows the
// config key into memory, so a call pays no round trip for it. A nil
// *ApprovalModes overrides nothing.
type ApprovalModes struct {
	kv    jetstream.KeyValue
	cur   atomic.Pointer[modeOverrides]
	gates atomic.Pointer[map[string][]string]
}

// modeOverrides are the overrides by tenant, then skill.
type modeOverrides map[string]map[string]string

// NewApprovalModes returns the overrides of the config bucket kv; call
// Start to follow them.
func NewApprovalModes(kv jetstream.KeyValue) *ApprovalModes { return &ApprovalModes{kv: kv} }

// Start loads the overrides and follows their changes until ctx ends.
func (a *ApprovalModes) Start(ctx context.Context) error {
	w, err := a.kv.WatchFiltered(ctx, []string{ConfigKeyApprovalModes, ConfigKeyApprovalGates})
	if err != nil {
		return fmt.Errorf("handlers: watch %s: %w", ConfigKeyApprovalModes, err)
	}
	return kvs.Follow(ctx, w, func(e jetstream.KeyValueEntry) {
		deleted := e.Operation() != jetstream.KeyValuePut
		if e.Key() == ConfigKeyApprovalGates {
			g, err := ParseApprovalGates(e.Value())
			if deleted {
				g, err = nil, nil
			}
			if err == nil {
				a.gates.Store(&g)
			}
			return
		}
		o, err := ParseApprovalModes(e.Value())
		if deleted {
			o, err = nil, nil // deleted: no overrides
		}
		if err == nil { // an invalid edit keeps the overrides in force
			mo := modeOverrides(o)
			a.cur.Store(&mo)
		}
	})
}

// ParseApprovalModes reads and checks the overrides.
func ParseApprovalModes(b []byte) (map[string]map[string]string, error) {
	var o map[string]map[string]string
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigKeyApprovalModes, err)
	}
	for tenant, bySkill := range o {
		for skill, mode := range bySkill {
			if !skills.ValidMode(mode) {
				return nil, fmt.Errorf("%s: %s.%s: %q is not one of %v", ConfigKeyApprovalModes, tenant, skill, mode, skills.Modes)
			}
		}
	}
	return o, nil
}

// ParseApprovalGates reads and checks the gated modes.
func ParseApprovalGates(b []byte) (map[string][]string, error) {
	var g map[string][]string
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigKeyApprovalGates, err)
	}
	for tenant, modes := range g {
		for _, mode := range modes {
			if !skills.ValidMode(mode) {
				return nil, fmt.Errorf("%s: %s: %q is not one of %v", ConfigKeyApprovalGates, tenant, mode, skills.Modes)
			}
		}
	}
	return g, nil
}

// Gated reports whether a call in mode by tenant goes through a gate:
// always for a destructive one; for the others, if the tenant's entry of
// approval_gates (else the "*" entry, else DefaultGatedModes) lists the
// mode.
func (a *ApprovalModes) Gated(tenant, mode string) bool {
	return mode == skills.ModeDestructive || slices.Contains(a.GatedModes(tenant), mode)
}

// GatedModes are the modes besides destructive that tenant's calls are
// gated in.
func (a *ApprovalModes) GatedModes(tenant string) []string {
	if a == nil {
		return DefaultGatedModes
	}
	g := a.gates.Load()
	if g == nil {
		return DefaultGatedModes
	}
	if modes, ok := (*g)[tenant]; ok {
		return modes
	}
	if modes, ok := (*g)["*"]; ok {
		return modes
	}
	return DefaultGatedModes
}

// Of is the approval mode of a call of m by tenant.
func (a *ApprovalModes) Of(tenant string, m skills.Manifest) string {
	if a != nil {
		if o := a.cur.Load(); o != nil {
			if mode, ok := (*o)[tenant][m.Name]; ok {
				return mode
			}
			if mode, ok := (*o)["*"][m.Name]; ok {
				return mode
			}
		}
	}
	return m.ApprovalMode()
}

// SetGatedModes changes tenant's entry of approval_gates in the config
// bucket kv by compare-and-set: modes (checked; an empty list gates no
// mode but destructive) or, with reset, no entry, so the tenant follows
// "*" or DefaultGatedModes again. It returns the policy stored.
func SetGatedModes(ctx context.Context, kv jetstream.KeyValue, tenant string, modes []string, reset bool) (map[string][]string, error) {
	for _, mode := range modes {
		if !skills.ValidMode(mode) {
			return nil, fmt.Errorf("%s: %q is not one of %v", ConfigKeyApprovalGates, mode, skills.Modes)
		}
	}
	e, err := kvcas.Update(ctx, kv, ConfigKeyApprovalGates, func(g *map[string][]string, _ uint64) (bool, error) {
		if *g == nil {
			*g = map[string][]string{}
		}
		if reset {
			delete(*g, tenant)
		} else {
			(*g)[tenant] = append([]string{}, modes...)
		}
		return true, nil
	})
	return e.Value, err
}

// GatedModesOf is the policy stored in kv's approval_gates: nil when the
// key is absent.
func GatedModesOf(ctx context.Context, kv jetstream.KeyValue) (map[string][]string, error) {
	e, err := kvcas.Get[map[string][]string](ctx, kv, ConfigKeyApprovalGates)
	return e.Value, err
}
