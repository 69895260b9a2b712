package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
)

// ackedMsg is a handled message whose acknowledgement is counted.
type ackedMsg struct {
	jetstream.Msg
	acks *atomic.Int32
	seq  uint64
}

func (m ackedMsg) Ack() error      { m.acks.Add(1); return nil }
func (m ackedMsg) Subject() string { return fmt.Sprintf("seq %d", m.seq) }

// TestAckFloorPassesOnlyWhatWasHandled: the cumulative acknowledgement of
// a trail reader moves over the sequences it handled and those the stream
// no longer holds, and stops before a message the stream still holds that
// it did not handle (handed to another reader before a failover, or
// waiting for its redelivery after a failure): acknowledging past it would
// acknowledge a message nobody handled.
func TestAckFloorPassesOnlyWhatWasHandled(t *testing.T) {
	_, js := connectInternal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := js.Publish(ctx, fmt.Sprintf("t.%d", i+1), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DeleteMsg(ctx, 4); err != nil { // an expired message, or a fired schedule's
		t.Fatal(err)
	}
	w := &Worker{js: js, stream: "T", cfg: WorkerConfig{Backoff: []time.Duration{time.Second}}}
	f := &ackFloor{w: w, ready: map[uint64]jetstream.Msg{}, failed: map[uint64]bool{}}
	var acks atomic.Int32
	handled := func(seqs ...uint64) {
		for _, s := range seqs {
			f.ready[s] = ackedMsg{acks: &acks, seq: s}
		}
		f.advance(ctx)
	}

	handled(1, 3) // 2 is held elsewhere
	if f.acked != 1 || acks.Load() != 1 {
		t.Fatalf("floor at %d after %d acks, want 1 after one: 2 is unhandled", f.acked, acks.Load())
	}
	handled(5)
	if f.acked != 1 {
		t.Fatalf("floor at %d, want still 1", f.acked)
	}
	f.failed[6] = true
	handled(2) // 4 is gone from the stream: passed; 6 failed: held
	if f.acked != 5 || acks.Load() != 2 {
		t.Fatalf("floor at %d after %d acks, want 5 after two", f.acked, acks.Load())
	}
	if len(f.ready) != 0 {
		t.Fatalf("ready %v after the floor passed them", f.ready)
	}
}

// TestUnpackBatchReadsWhatATrailHolds: a trail's events decode as they
// were built, every attribute and extension and the data intact; what is
// not a batch of valid CloudEvents with JSON data is refused.
func TestUnpackBatchReadsWhatATrailHolds(t *testing.T) {
	in, err := New("in-1", TypeStepRequested, Meta{Tenant: "acme", Session: "s-1", Run: "run-1", Correlation: "grp-1",
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	for i, payload := range []string{`{"n":1}`, `{"text":"line\nbreak \u00e9","list":[1,2.5,null,true]}`, ``} {
		ev, err := Child(in, fmt.Sprint(i), AuditType("step_1.started"), Audit{PlanID: "plan-1", Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		SetExt(&ev, ExtTask, "task-1")
		evs = append(evs, ev)
	}
	evs[1].SetSubject("step 1")
	evs[2].SetExtension("custom", "x")
	data, _, err := encodeTrail(new(bytes.Buffer), evs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := unpackBatch(data)
	if err != nil || len(got) != len(evs) {
		t.Fatalf("unpacked %d events (%v), want %d", len(got), err, len(evs))
	}
	for i, ev := range got {
		want := evs[i]
		if ev.ID() != want.ID() || ev.Type() != want.Type() || ev.Source() != want.Source() || ev.Subject() != want.Subject() ||
			!ev.Time().Equal(want.Time()) || ev.DataContentType() != want.DataContentType() || string(ev.Data()) != string(want.Data()) ||
			fmt.Sprint(ev.Extensions()) != fmt.Sprint(want.Extensions()) {
			t.Errorf("event %d:\n%v\nwant\n%v", i, ev, want)
		}
	}

	one := func(members string) string {
		return `{"specversion":"1.0","id":"e-1","source":"agentbus/x","type":"io.agentbus.audit.a.b"` + members + `}`
	}
	b64, err := unpackBatch([]byte(`[` + one(`,"data_base64":"eyJuIjoxfQ=="`) + `]`))
	if err != nil || string(b64[0].Data()) != `{"n":1}` {
		t.Errorf("base64 data: %v (%v)", b64, err)
	}
	for name, batch := range map[string]string{
		"not JSON":          `[{"specversion":"1.0"`,
		"not an array":      one(``),
		"empty":             `[]`,
		"other specversion": `[{"specversion":"0.3","id":"e-1","source":"agentbus/x","type":"t"}]`,
		"no id":             `[{"specversion":"1.0","source":"agentbus/x","type":"t"}]`,
		"no type":           `[{"specversion":"1.0","id":"e-1","source":"agentbus/x"}]`,
		"bad time":          `[` + one(`,"time":"yesterday"`) + `]`,
		"data not JSON":     `[` + one(`,"data":{"n":}`) + `]`,
		"base64 not JSON":   `[` + one(`,"data_base64":"bm90IGpzb24="`) + `]`,
		"bad extension":     `[` + one(`,"Not-An-Extension":"x"`) + `]`,
	} {
		if _, err := unpackBatch([]byte(batch)); !errors.Is(err, ErrDecode) || !IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent ErrDecode", name, err)
		}
	}
}
