package store

import (
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// benchEvent is a small event document, as the runtime appends them.
func benchEvent() Event {
	return Event{EventID: "0195f7a2-6c1e-7b3a-9f7e-2d4c8a1b3e5f", TenantID: "tenant-1", SessionID: "session-1",
		PlanID: "plan-1", TaskID: "task-1", EventType: "step.completed", SkillID: "web.search",
		Payload: json.RawMessage(`{"step_index":1,"ok":true}`), TS: t0}
}

// benchPlan is a plan projection with three steps, one replan and usage.
func benchPlan() Plan {
	return Plan{PlanID: "plan-1", SessionID: "session-1", TenantID: "tenant-1", UserID: "user-1",
		Status: PlanStatusExecuting, ReplanCount: 1, CreatedAt: t0,
		Steps: []PlanStep{
			{StepIndex: 0, Task: "search", Skills: []string{"web.search"}, Status: StepStatusComplete,
				ReturnSpec: json.RawMessage(`{"type":"object"}`), Validated: true, StartedAt: t0, FinishedAt: t0},
			{StepIndex: 1, Task: "summarise", InputFromStep: []int{0}, Status: StepStatusRunning, StartedAt: t0},
			{StepIndex: 2, Task: "answer", InputFromStep: []int{0, 1}, Status: StepStatusPending},
		},
		ReplanHistory: []ReplanRecord{{Attempt: 1, Trigger: "step_failed", FailedStep: 1, Reason: "timeout", RevisedAt: t0}},
		Usage:         domain.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0042, Calls: 3},
	}
}

// BenchmarkEncode measures Encode on the documents the backends write on
// every event and plan projection, and on an untyped event (json.RawMessage),
// which is still validated against the JSON Schema.
func BenchmarkEncode(b *testing.B) {
	raw, err := json.Marshal(benchEvent())
	if err != nil {
		b.Fatal(err)
	}
	docs := []struct {
		name, index string
		doc         any
	}{
		{"event", IndexEvents, benchEvent()},
		{"plan", IndexPlans, benchPlan()},
		{"event-raw", IndexEvents, json.RawMessage(raw)},
	}
	for _, d := range docs {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(d.index, d.doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
