package runclient

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
)

// follower hands every message stored on its subjects in the AGENT
// stream, from a starting sequence on, to handle, once and in order. It
// reads them with an ephemeral consumer that it recreates itself, from
// the sequence after the last message handed over, whenever the consumer
// reports trouble: a missed heartbeat (its server died or restarted), a
// deleted consumer, a gap in its delivery sequence. On a cluster the node
// holding the consumer may die at any moment; the client library's
// ordered consumer was seen to stop handing messages over after such a
// failure without reporting anything.
type follower struct {
	js       jetstream.JetStream
	subjects []string
	handle   func(jetstream.Msg)
	onError  func(error)

	mu    sync.Mutex
	next  uint64 // stream sequence of the next message to hand over
	gen   int    // the consumer generation whose messages are handed over
	dseq  uint64 // the last delivery sequence of this generation
	reset chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

func newFollower(js jetstream.JetStream, subjects []string, from uint64, handle func(jetstream.Msg), onError func(error)) *follower {
	return &follower{js: js, subjects: subjects, next: from, handle: handle, onError: onError,
		reset: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// start creates the first consumer, so that a client that cannot follow
// the stream fails at once, then keeps following until Stop.
func (f *follower) start(ctx context.Context) error {
	cc, err := f.consume(ctx)
	if err != nil {
		return err
	}
	go f.run(cc)
	return nil
}

// Stop stops following.
func (f *follower) Stop() {
	close(f.stop)
	<-f.done
}

func (f *follower) run(cc jetstream.ConsumeContext) {
	defer close(f.done)
	// A message the server delivered while the connection was down is
	// lost to this consumer (it acknowledges nothing), and nothing may
	// follow it to reveal the gap: every reconnection starts a new one.
	nc := f.js.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	wait := 250 * time.Millisecond
	for {
		select {
		case <-f.stop:
			if cc != nil {
				cc.Stop()
			}
			return
		case <-reconnected:
		case <-f.reset:
		}
		if cc != nil {
			cc.Stop() // the server drops the consumer once inactive
		}
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cc, err = f.consume(ctx)
		cancel()
		if err != nil {
			f.report(err)
			select {
			case <-f.stop:
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
			f.trigger()
			continue
		}
		wait = 250 * time.Millisecond
	}
}

// consume creates a consumer of the next generation from f.next and
// starts pulling from it.
func (f *follower) consume(ctx context.Context) (jetstream.ConsumeContext, error) {
	f.mu.Lock()
	f.gen++
	gen, from := f.gen, f.next
	f.dseq = 0
	f.mu.Unlock()
	cons, err := f.js.CreateConsumer(ctx, events.StreamAgent, jetstream.ConsumerConfig{
		FilterSubjects: f.subjects, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, Replicas: 1, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return nil, err
	}
	return cons.Consume(func(m jetstream.Msg) { f.deliver(gen, m) }, jetstream.PullExpiry(events.PullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			f.report(err)
			f.mu.Lock()
			current := gen == f.gen
			f.mu.Unlock()
			if current {
				f.trigger() // whatever went wrong, a new consumer resumes where this one was
			}
		}))
}

// deliver hands m over if it is the next message of the current
// generation; a gap starts a new one.
func (f *follower) deliver(gen int, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	f.mu.Lock()
	if gen != f.gen || md.Sequence.Stream < f.next {
		f.mu.Unlock()
		return
	}
	if md.Sequence.Consumer != f.dseq+1 {
		f.mu.Unlock()
		f.trigger()
		return
	}
	f.dseq, f.next = md.Sequence.Consumer, md.Sequence.Stream+1
	f.mu.Unlock()
	f.handle(m)
}

func (f *follower) trigger() {
	select {
	case f.reset <- struct{}{}:
	default:
	}
}

func (f *follower) report(err error) {
	if f.onError != nil && err != nil {
		f.onError(err)
	}
}
