package metrics

import (
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentbus/agentbus/events"
)

func auditEvent(t *testing.T, payload any) events.Audit {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return events.Audit{Payload: b}
}

// Observe reads the stored outputs that say something about runs: a
// gate opened by kind, a budget stop by role, a large response, a failed
// model call; GateWait times a gate by kind and decision; anything else
// counts nothing.
func TestObserve_CountsWhatTheOutputsSay(t *testing.T) {
	meta := events.Meta{Tenant: "acme", Session: "s1", Run: "run-1"}
	for i, o := range []struct {
		name    string
		payload any
	}{
		{"gate.opened", map[string]any{"gate_id": "gate-1", "kind": "elicitation"}},
		{"budget.exhausted", map[string]any{"dimension": "tool_calls"}},
		{"skill.called", map[string]any{"skill_id": "menu_catalog", "duration_ms": 1500, "large_response_triggered": true}},
		{"model.called", map[string]any{"task": "act", "provider": "openai", "model": "m1", "input_tokens": 10, "error": "rate limited"}},
		{"step_1.started", map[string]any{"step": 1}},
	} {
		ev, err := events.New("ev-"+o.name, events.AuditType(o.name), meta, auditEvent(t, o.payload))
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		Observe("executor", ev)
	}
	GateWait("elicitation", "approved", 90*time.Second)
	for what, got := range map[string]float64{
		"gates opened (elicitation)": testutil.ToFloat64(gatesOpened.WithLabelValues("elicitation")),
		"budget stops (executor)":    testutil.ToFloat64(budgetStops.WithLabelValues("executor")),
		"large responses":            testutil.ToFloat64(largeResponses),
		"menu_catalog calls":         testutil.ToFloat64(skillCalls.WithLabelValues("menu_catalog", "ok")),
		"failed model calls":         testutil.ToFloat64(modelCalls.WithLabelValues("openai", "m1", "act", "error")),
		"input tokens":               testutil.ToFloat64(modelTokens.WithLabelValues("openai", "m1", "input")) / 10,
	} {
		if got != 1 {
			t.Errorf("%s = %v, want 1", what, got)
		}
	}
	if n := testutil.CollectAndCount(gateWait); n != 1 {
		t.Errorf("%d gate wait series, want 1", n)
	}
	if n := testutil.CollectAndCount(runsFinished); n != 0 {
		t.Errorf("an audit event counted %d finished runs", n)
	}
}

// RequestLimited counts refusals by code; ModelSlotWait observes waits
// by provider.
func TestRequestLimitsAndSlotWaits(t *testing.T) {
	RequestLimited("rate_limited")
	RequestLimited("rate_limited")
	RequestLimited("concurrency_limited")
	ModelSlotWait("openai", 200*time.Millisecond)
	if got := testutil.ToFloat64(requestsLimited.WithLabelValues("rate_limited")); got != 2 {
		t.Errorf("rate_limited = %v, want 2", got)
	}
	if got := testutil.ToFloat64(requestsLimited.WithLabelValues("concurrency_limited")); got != 1 {
		t.Errorf("concurrency_limited = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(modelSlotWait); n != 1 {
		t.Errorf("%d slot wait series, want 1", n)
	}
}
