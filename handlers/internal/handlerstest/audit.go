package handlerstest

import (
	"context"
	"sync"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
)

// ExhaustedDim returns the dimension of the run's budget.exhausted or
// budget.early_stop audit.
func ExhaustedDim(t *testing.T, seen []event.Event) string {
	t.Helper()
	for _, name := range []string{"budget.exhausted", "budget.early_stop"} {
		if ps := AuditPayloads(t, seen, name); len(ps) > 0 {
			d, _ := ps[0]["dimension"].(string)
			return d
		}
	}
	return ""
}

// AuditPayloads decodes the payloads of the audit events named name.
func AuditPayloads(t *testing.T, seen []event.Event, name string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range OfType(seen, events.AuditType(name)) {
		a := Decode[events.Audit](t, ev)
		var p map[string]any
		if err := json.Unmarshal(a.Payload, &p); err != nil {
			t.Fatalf("%s payload: %v", name, err)
		}
		out = append(out, p)
	}
	return out
}

// Carriers remembers the output that carries each audit event of the hops
// it is given (events.CarrierOf), so a test handing the projector audit
// events one by one gives each its carrier, as the worker reading trails
// does (events.Carrier). The zero value is ready; it is safe for
// concurrent use.
type Carriers struct {
	mu   sync.Mutex
	byID map[string][]byte // carrier data by audit event id
}

// Add records the carrier of a hop's outputs outs for each of its audit
// events, and returns outs.
func (c *Carriers) Add(outs []event.Event) []event.Event {
	carrier, ok := events.CarrierOf(outs)
	if !ok {
		return outs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string][]byte{}
	}
	for _, o := range outs {
		if events.IsAuditType(o.Type()) {
			c.byID[o.ID()] = carrier.Data()
		}
	}
	return outs
}

// Ctx is ctx for the projector handling the audit event ev: with its
// trail's carrier, when it had one.
func (c *Carriers) Ctx(ctx context.Context, ev event.Event) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if data, ok := c.byID[ev.ID()]; ok {
		return events.WithCarrier(ctx, data)
	}
	return ctx
}
