package events

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
)

// hopAudits are five audit events of one hop, as an executor's or a
// router's outbox builds them (handlers.Outbox.Audit).
func hopAudits(tb testing.TB, in event.Event) []event.Event {
	evs := make([]event.Event, 0, 5)
	for i := range 5 {
		a := Audit{PlanID: "plan-0aced3a8-d2d8-5b68", TaskID: "task-8c93bf83-79e7", UserID: "u-fa3b93eb",
			Payload: []byte(`{"memory_key":"bench:s-fa3b93eb:task-8c93bf83-79e7:s3_ids","attempt":1}`)}
		ev := ChildJSON(in, "audit/step_3.complete/"+strconv.Itoa(i+1), AuditType("step_3.complete"), a.AppendJSON(nil))
		SetExt(&ev, ExtTask, a.TaskID)
		evs = append(evs, ev)
	}
	if err := validate(evs[0]); err != nil {
		tb.Fatal(err)
	}
	return evs
}

func hopInput(tb testing.TB) event.Event {
	in, err := New("29c14626-aeba-558d-b8c0-c70d6062d310", TypeStepRequested, Meta{Tenant: "bench", Session: "s-fa3b93eb",
		Run: "fa3b93eb-0078-41e8-a746-f9eb5c1d5c08", SourceProcess: "executor"}, map[string]int{"step": 3})
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// BenchmarkHopAudits: building a hop's five audit events.
func BenchmarkHopAudits(b *testing.B) {
	in := hopInput(b)
	for b.Loop() {
		hopAudits(b, in)
	}
}

// BenchmarkEncodeTrail: a hop's five audit events encoded as its trail.
func BenchmarkEncodeTrail(b *testing.B) {
	evs := hopAudits(b, hopInput(b))
	var buf bytes.Buffer
	for b.Loop() {
		if _, _, err := encodeTrail(&buf, evs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnpackTrail: the projector's reading of that trail.
func BenchmarkUnpackTrail(b *testing.B) {
	var buf bytes.Buffer
	data, _, err := encodeTrail(&buf, hopAudits(b, hopInput(b)))
	if err != nil {
		b.Fatal(err)
	}
	data = bytes.Clone(data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := unpackBatch(data); err != nil {
			b.Fatal(err)
		}
	}
}
