package events

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestFloorWatch: the ack floor counts as stuck once it has stood still
// for StuckAfter with messages awaiting acks, then again only after
// StuckAfter plus twice the ack wait (so the messages reported have their
// ack wait run out first); a moving floor or no message awaiting an ack
// starts the wait over.
func TestFloorWatch(t *testing.T) {
	const after = 30 * time.Second
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	info := func(floor uint64, awaiting int) *jetstream.ConsumerInfo {
		return &jetstream.ConsumerInfo{NumAckPending: awaiting, AckFloor: jetstream.SequenceInfo{Stream: floor},
			Config: jetstream.ConsumerConfig{AckWait: 20 * time.Second}}
	}
	var f floorWatch
	for i, c := range []struct {
		at    time.Duration
		floor uint64
		await int
		want  bool
	}{
		{0, 29, 7, false},                 // first look
		{20 * time.Second, 29, 7, false},  // 20 s still
		{30 * time.Second, 29, 7, true},   // 30 s: stuck
		{60 * time.Second, 29, 7, false},  // 30 s since the report: less than 30 s + 2 × 20 s
		{100 * time.Second, 29, 7, true},  // 70 s since it
		{110 * time.Second, 31, 7, false}, // the floor moved
		{130 * time.Second, 31, 0, false}, // nothing awaits an ack
		{150 * time.Second, 31, 2, false}, // awaiting again: the wait starts over
		{170 * time.Second, 31, 2, false}, // 20 s
		{180 * time.Second, 31, 2, true},  // 30 s
	} {
		if got := f.stuck(info(c.floor, c.await), t0.Add(c.at), after); got != c.want {
			t.Fatalf("look %d at %v: stuck %v, want %v", i, c.at, got, c.want)
		}
	}
}
