package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/skills"
)

// ConfigKeyApprovalModes holds the tenants' approval-mode overrides in the
// config bucket: {"<tenant>": {"<skill>": "<mode>"}}, with "*" for every
// tenant (a tenant's own entry wins).
const ConfigKeyApprovalModes = "approval_modes"

// ApprovalModes gives each skill call its approval mode (seed 004): the
// tenant's override from the config bucket if there is one, else the
// skill's own (skills.Manifest.ApprovalMode). Once started it follows the
// config key into memory, so a call pays no round trip for it. A nil
// *ApprovalModes overrides nothing.
type ApprovalModes struct {
	kv  jetstream.KeyValue
	cur atomic.Pointer[modeOverrides]
}

// modeOverrides are the overrides by tenant, then skill.
type modeOverrides map[string]map[string]string

// NewApprovalModes returns the overrides of the config bucket kv; call
// Start to follow them.
func NewApprovalModes(kv jetstream.KeyValue) *ApprovalModes { return &ApprovalModes{kv: kv} }

// Start loads the overrides and follows their changes until ctx ends.
func (a *ApprovalModes) Start(ctx context.Context) error {
	w, err := a.kv.Watch(ctx, ConfigKeyApprovalModes)
	if err != nil {
		return fmt.Errorf("handlers: watch %s: %w", ConfigKeyApprovalModes, err)
	}
	first := make(chan struct{})
	go func() {
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil { // the initial values are in
				close(first)
				continue
			}
			o, err := ParseApprovalModes(e.Value())
			if e.Operation() != jetstream.KeyValuePut {
				o, err = nil, nil // deleted: no overrides
			}
			if err == nil { // an invalid edit keeps the overrides in force
				mo := modeOverrides(o)
				a.cur.Store(&mo)
			}
		}
	}()
	select {
	case <-first:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
