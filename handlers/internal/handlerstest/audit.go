package handlerstest

import (
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
