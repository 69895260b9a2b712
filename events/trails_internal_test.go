package events

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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
	s, err := server.NewServer(&server.Options{Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
