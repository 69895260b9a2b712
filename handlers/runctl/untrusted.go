package runctl

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
)

// ConfigKeyTaintPolicy holds the tenants' taint policies in the config
// bucket: {"<tenant>": "gate" | "relaxed"}, with "*" for every tenant (a
// tenant's own entry wins). Under "gate" (the default) a step that has
// observed the output of an open-world skill calls no side-effecting
// skill (local_write, network, delegated, destructive) without going
// through an approval gate; "relaxed" lets such calls through unless
// their mode is gated anyway.
const ConfigKeyTaintPolicy = "taint_policy"

// ConfigKeyInjectionPolicy holds what a suspected prompt injection in a
// tool result does, per tenant: {"<tenant>": "record" | "stop"}, with
// "*" for every tenant. "record" (the default) traces it
// (injection.suspected) and the step goes on; "stop" also ends the run
// UNSAFE_DETECTION.
const ConfigKeyInjectionPolicy = "injection_policy"

// Taint and injection policies.
const (
	TaintGate       = "gate"
	TaintRelaxed    = "relaxed"
	InjectionRecord = "record"
	InjectionStop   = "stop"
)

// UntrustedPolicy is what each tenant does about untrusted content: its
// taint policy and its injection policy, from the config bucket. Once
// started it follows both keys into memory. A nil *UntrustedPolicy, and a
// tenant with no entry, has the defaults: gate, record.
type UntrustedPolicy struct {
	kv        jetstream.KeyValue
	taint     atomic.Pointer[map[string]string]
	injection atomic.Pointer[map[string]string]
}

// NewUntrustedPolicy returns the policies of the config bucket kv; call
// Start to follow them.
func NewUntrustedPolicy(kv jetstream.KeyValue) *UntrustedPolicy { return &UntrustedPolicy{kv: kv} }

// Start loads the policies and follows their changes until ctx ends. An
// invalid edit keeps the policy in force; a deleted key restores the
// defaults.
func (p *UntrustedPolicy) Start(ctx context.Context) error {
	return followChoices(ctx, p.kv, choiceKey{ConfigKeyTaintPolicy, ParseTaintPolicy, &p.taint},
		choiceKey{ConfigKeyInjectionPolicy, ParseInjectionPolicy, &p.injection})
}

// choiceKey is a config key of per-tenant choices a policy follows into
// cur, each value read by parse.
type choiceKey struct {
	key   string
	parse func([]byte) (map[string]string, error)
	cur   *atomic.Pointer[map[string]string]
}

// followChoices loads the keys of kv and follows their changes until ctx
// ends: an invalid edit keeps the choices in force; a deleted key clears
// them (the defaults).
func followChoices(ctx context.Context, kv jetstream.KeyValue, keys ...choiceKey) error {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.key
	}
	w, err := kv.WatchFiltered(ctx, slices.Clone(names)) // it rewrites the keys it is given into subjects
	if err != nil {
		return fmt.Errorf("handlers: watch %v: %w", names, err)
	}
	return kvs.Follow(ctx, w, func(e jetstream.KeyValueEntry) {
		i := slices.Index(names, e.Key())
		if i < 0 {
			return
		}
		if e.Operation() != jetstream.KeyValuePut {
			keys[i].cur.Store(nil)
			return
		}
		if m, err := keys[i].parse(e.Value()); err == nil {
			keys[i].cur.Store(&m)
		}
	})
}

// ParseTaintPolicy reads and checks a taint_policy value.
func ParseTaintPolicy(b []byte) (map[string]string, error) {
	return parseTenantChoices(ConfigKeyTaintPolicy, b)
}

// ParseInjectionPolicy reads and checks an injection_policy value.
func ParseInjectionPolicy(b []byte) (map[string]string, error) {
	return parseTenantChoices(ConfigKeyInjectionPolicy, b)
}

// parseTenantChoices reads {"<tenant>": "<choice>"} and checks every
// choice is one of the key's (TenantChoiceKeys).
func parseTenantChoices(key string, b []byte) (map[string]string, error) {
	choices := TenantChoiceKeys[key]
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	for tenant, c := range m {
		if !slices.Contains(choices, c) {
			return nil, fmt.Errorf("%s: %s: %q is not one of %v", key, tenant, c, choices)
		}
	}
	return m, nil
}

// TaintRelaxed reports whether tenant's taint policy is relaxed.
func (p *UntrustedPolicy) TaintRelaxed(tenant string) bool {
	return p != nil && choiceOf(p.taint.Load(), tenant) == TaintRelaxed
}

// InjectionStops reports whether a suspected injection ends tenant's run.
func (p *UntrustedPolicy) InjectionStops(tenant string) bool {
	return p != nil && choiceOf(p.injection.Load(), tenant) == InjectionStop
}

// choiceOf is tenant's entry of m, else its "*" entry, else "".
func choiceOf(m *map[string]string, tenant string) string {
	if m == nil {
		return ""
	}
	if c, ok := (*m)[tenant]; ok {
		return c
	}
	return (*m)["*"]
}
