package orch

import (
	"fmt"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	json "github.com/go-json-experiment/json/v1"
)

// benchStepRequest is the step.requested of the benchmark's 5-step run
// at its last step: four steps done, their outputs carried, the fifth
// running. Its run state is what every hop of a run decodes and most
// encode again.
func benchStepRequest() StepRequest {
	at := time.Date(2026, 11, 29, 3, 41, 28, 745556756, time.UTC)
	var steps []Step
	for k := 1; k <= 5; k++ {
		field := fmt.Sprintf("s%d_ids", k)
		s := Step{Index: k, Task: fmt.Sprintf("Bench pipeline stage %d of five, returning only %s (for: Run the five stage bench pipeline)", k, field),
			Skills: []string{fmt.Sprintf("stage%d", k)}, Status: StepComplete, TaskID: fmt.Sprintf("task-c1598f02-97e%d", k),
			ReturnSpec: ReturnSpec{Shape: json.RawMessage(`{"type":"object","required":["` + field + `"],"properties":{"` + field +
				`":{"type":"array","items":{"type":"string"}}}}`), Reason: fmt.Sprintf("stage%d needs %s", k+1, field)},
			MemoryKey: fmt.Sprintf("bench:s-0a84f698:task-c1598f02-97e%d:%s", k, field), Validated: true,
			StartedAt: at.Add(time.Duration(k) * 3 * time.Millisecond), FinishedAt: at.Add(time.Duration(k)*3*time.Millisecond + 2*time.Millisecond),
			Output: json.RawMessage(fmt.Sprintf(`{"%s":["s%d-1","s%d-2","s%d-3","s%d-4","s%d-5","s%d-6","s%d-7","s%d-8"]}`, field, k, k, k, k, k, k, k, k))}
		if k > 1 {
			s.DependsOn = []int{k - 1}
		}
		if k == 5 {
			s.Status, s.MemoryKey, s.Validated, s.FinishedAt, s.Output = StepRunning, "", false, time.Time{}, nil
		}
		steps = append(steps, s)
	}
	return StepRequest{
		Run: RunState{Request: RunRequest{RunID: "f3714be9-48e3-5e15-babb-fc0bb1616cbf", TenantID: "bench", UserID: "u-0a84f698",
			SessionID: "s-0a84f698", Message: "Run the five stage bench pipeline"},
			TaskType: "analysis", Pattern: "plan_then_execute", Routing: "the task names several dependent stages, so it is planned first and run step by step",
			Plan: Plan{PlanID: "plan-6f0e92c0-5d8d-55de", Status: PlanExecuting, Steps: steps, CreatedAt: at},
			Seq:  9, Deadline: at.Add(5 * time.Minute)},
		Step: 5, Group: Group{ID: "f3714be9-48e3-5e15-babb-fc0bb1616cbf/g5", Expected: 1},
		Inputs: []string{"bench:s-0a84f698:task-c1598f02-97e4:s4_ids"},
	}
}

// strict decodes as the workers decode every input (events.Decode).
var strict = jsonv2.JoinOptions(json.DefaultOptionsV1(), jsonv2.RejectUnknownMembers(true))

// BenchmarkStepRequestCodec sizes what a hop spends on the run state it
// carries: decoding a step.requested as a worker does, and encoding it as
// an outbox does. A codec written for these types, rather than the
// reflective one, is measured against it here.
func BenchmarkStepRequestCodec(b *testing.B) {
	req := benchStepRequest()
	data, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var v StepRequest
			if err := jsonv2.Unmarshal(data, &v, strict); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := json.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBenchStepRequestRoundTrips: the benchmark's fixture decodes back to
// itself, so the benchmark measures a complete run state.
func TestBenchStepRequestRoundTrips(t *testing.T) {
	req := benchStepRequest()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got StepRequest
	if err := jsonv2.Unmarshal(data, &got, strict); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(got)
	if string(again) != string(data) || len(data) < 3000 {
		t.Fatalf("%d bytes, round trip differs: %v", len(data), string(again) != string(data))
	}
}
