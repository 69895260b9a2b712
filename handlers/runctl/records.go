package runctl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
)

// ConfigKeyPayloadRecords holds, in the config bucket, which tenants keep
// payload records: {"<tenant>": "keep" | "off"}, with "*" for every
// tenant (a tenant's own entry wins). A tenant that keeps them has each
// model call's request and answer in its model.called events and each
// tool result in its skill.called events, redacted as logs are and
// clipped (llm.PayloadRecord), under the trace's retention. Off (the
// default) keeps counts, hashes and sizes only.
const ConfigKeyPayloadRecords = "payload_records"

// Payload record choices.
const (
	RecordsKeep = "keep"
	RecordsOff  = "off"
)

// RecordPolicy is which tenants keep payload records, from the config
// bucket; once started it follows the key into memory. A nil
// *RecordPolicy, and a tenant with no entry, keeps none.
type RecordPolicy struct {
	kv      jetstream.KeyValue
	records atomic.Pointer[map[string]string]
}

// NewRecordPolicy returns the policy of the config bucket kv; call Start
// to follow it.
func NewRecordPolicy(kv jetstream.KeyValue) *RecordPolicy { return &RecordPolicy{kv: kv} }

// Start loads the policy and follows its changes until ctx ends.
func (p *RecordPolicy) Start(ctx context.Context) error {
	return followChoices(ctx, p.kv, choiceKey{ConfigKeyPayloadRecords, ParsePayloadRecords, &p.records})
}

// ParsePayloadRecords reads and checks a payload_records value.
func ParsePayloadRecords(b []byte) (map[string]string, error) {
	return parseTenantChoices(ConfigKeyPayloadRecords, b)
}

// Keeps reports whether tenant's runs keep payload records.
func (p *RecordPolicy) Keeps(tenant string) bool {
	return p != nil && choiceOf(p.records.Load(), tenant) == RecordsKeep
}

// TenantChoiceKeys are the config keys of per-tenant choices and their
// choices, the default first.
var TenantChoiceKeys = map[string][]string{
	ConfigKeyTaintPolicy:     {TaintGate, TaintRelaxed},
	ConfigKeyInjectionPolicy: {InjectionRecord, InjectionStop},
	ConfigKeyPayloadRecords:  {RecordsOff, RecordsKeep},
}

// SetTenantChoice sets tenant's entry ("*": every tenant not named) of
// the per-tenant choice key to choice, or removes it when choice is "",
// by compare-and-set, and returns the key's entries.
func SetTenantChoice(ctx context.Context, kv jetstream.KeyValue, key, tenant, choice string) (map[string]string, error) {
	choices, ok := TenantChoiceKeys[key]
	switch {
	case !ok:
		return nil, fmt.Errorf("%q is not a per-tenant choice (%v)", key, slices.Sorted(maps.Keys(TenantChoiceKeys)))
	case choice != "" && !slices.Contains(choices, choice):
		return nil, fmt.Errorf("%s: %q is not one of %v", key, choice, choices)
	}
	e, err := kvcas.Update(ctx, kv, key, func(m *map[string]string, _ uint64) (bool, error) {
		if *m == nil {
			*m = map[string]string{}
		}
		if choice == "" {
			delete(*m, tenant)
		} else {
			(*m)[tenant] = choice
		}
		return true, nil
	})
	return e.Value, err
}

// TenantChoicesOf is the entries of a per-tenant choice key: nil when the
// key is absent.
func TenantChoicesOf(ctx context.Context, kv jetstream.KeyValue, key string) (map[string]string, error) {
	e, err := kvcas.Get[map[string]string](ctx, kv, key)
	return e.Value, err
}
