package events

import (
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
)

// flights are the messages a worker is handling. One ticker per worker
// tells JetStream they are still being worked on, rather than a goroutine
// and a ticker per message: a hop takes about a millisecond, and most
// messages end long before their first heartbeat is due.
type flights struct {
	w  *Worker
	mu sync.Mutex
	in map[*flight]struct{}
}

type flight struct {
	msg   jetstream.Msg
	ev    event.Event
	start time.Time
	told  bool // OnSlow was told of it
}

func newFlights(w *Worker) *flights {
	return &flights{w: w, in: make(map[*flight]struct{})}
}

// add records msg (whose first event is ev) as being handled until the
// returned stop function is called.
func (f *flights) add(msg jetstream.Msg, ev event.Event) (stop func()) {
	fl := &flight{msg: msg, ev: ev, start: time.Now()}
	f.mu.Lock()
	f.in[fl] = struct{}{}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.in, fl)
		f.mu.Unlock()
	}
}

// beat sends the heartbeats every Heartbeat until stopped: InProgress for
// each message handled for at least half of Heartbeat, so the first one
// reaches the server within 1.5 × Heartbeat (half the ack wait by
// default) and the next ones every Heartbeat; and OnSlow, once, for each
// message handled for SlowAfter.
func (f *flights) beat() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(f.w.cfg.Heartbeat)
		defer t.Stop()
		var due []*flight
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				due = f.due(now, due[:0])
				for _, fl := range due {
					_ = fl.msg.InProgress()
				}
				f.slow(now)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (f *flights) due(now time.Time, into []*flight) []*flight {
	f.mu.Lock()
	defer f.mu.Unlock()
	for fl := range f.in {
		if now.Sub(fl.start) >= f.w.cfg.Heartbeat/2 {
			into = append(into, fl)
		}
	}
	return into
}

func (f *flights) slow(now time.Time) {
	if f.w.cfg.OnSlow == nil {
		return
	}
	var told []*flight
	f.mu.Lock()
	for fl := range f.in {
		if !fl.told && now.Sub(fl.start) >= f.w.cfg.SlowAfter {
			fl.told = true
			told = append(told, fl)
		}
	}
	f.mu.Unlock()
	for _, fl := range told {
		f.w.cfg.OnSlow(fl.ev, now.Sub(fl.start))
	}
}
