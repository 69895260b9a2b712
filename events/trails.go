package events

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SingleGroup is the priority group of a Consumer.Single: the server pins
// it to one client at a time.
const SingleGroup = "single"

// TrailLinger is how long a trail reader gathers messages after the first
// of a batch, so that the trails of several hops are written together,
// and how long at most a run's trails wait for a flush (see due).
const TrailLinger = 50 * time.Millisecond

// maxTrailBatch bounds the messages one batch reads.
const maxTrailBatch = 256

// trailPoll is how long a batch whose gathering a flush ended still takes
// the messages that arrive: what the reader has already been delivered,
// and under load the next few runs' ends, so that a reader whose runs end
// every millisecond or two does not write one batch per run's end.
const trailPoll = 3 * time.Millisecond

// runTrails is Run for a worker that reads trails (WorkerConfig.Trails)
// on a Consumer.Single: one process at a time reads the consumer, in
// batches (the first message, then whatever else arrives within
// TrailLinger, or until a message FlushOn names and whatever had arrived
// with it), and acknowledges cumulatively (AckAll) up to the last
// message before which it has handled every message of the stream
// (ackFloor). A batch costs one pull at most, one group write of the
// handlers' deferred waits and one acknowledgement, however many hops'
// trails it holds.
//
// A flush writes its own run's trails at once, not every run's: the
// trails of a run that no flush names and that have waited less than
// the linger stay for the next batch (due), so a run's trails are
// written together at its end, or once a linger, however often other
// runs end. Under load, where some run ends every few milliseconds, a
// run's plan projection and events were otherwise written once per
// batch its hops fell in.
func (w *Worker) runTrails(ctx context.Context) error {
	stopAdvisories, err := w.watchMaxDeliveries(ctx)
	if err != nil {
		return err
	}
	defer stopAdvisories()
	floor, err := w.newAckFloor(ctx)
	if err != nil {
		return err
	}
	// A batch under way when ctx ends is finished, within DrainWait.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(w.cfg.DrainWait, cancelWork) })
	defer stop()
	defer w.unpin(work)
	kept := newKeptGoroutines()
	defer kept.stop()
	var carried []*trailMsg // trails left for a later batch (due)
	for ctx.Err() == nil {
		it, err := w.cons.Messages(jetstream.PullMaxMessages(maxTrailBatch), jetstream.PullExpiry(PullExpiry),
			jetstream.PullPriorityGroup(SingleGroup))
		if err != nil {
			w.report(nil, "", fmt.Errorf("events: %s: read: %w", w.durable, err))
			sleep(ctx, time.Second)
			continue
		}
		for ctx.Err() == nil {
			batch, fresh := carried, 0 // fresh: the messages this batch read
			if len(batch) == 0 {
				first, err := it.Next(jetstream.NextContext(ctx))
				if err != nil {
					if ctx.Err() == nil {
						w.report(nil, "", fmt.Errorf("events: %s: read: %w", w.durable, err))
					}
					break // read anew
				}
				batch, fresh = []*trailMsg{w.decodeTrail(first)}, 1
			}
			flushed := slices.ContainsFunc(batch, func(it *trailMsg) bool { return it.flush })
			var broken error // the reader's, other than a wait's timeout
			for end := batch[0].at.Add(w.cfg.Linger); fresh < maxTrailBatch; {
				wait := time.Until(end)
				if flushed {
					// A flush cuts the linger short, not the batch: what
					// has already arrived goes with it. A reader that
					// falls behind so takes its whole backlog at once.
					wait = min(wait, trailPoll)
				}
				if wait <= 0 {
					break
				}
				m, err := it.Next(jetstream.NextMaxWait(wait))
				if err != nil {
					if !errors.Is(err, nats.ErrTimeout) {
						broken = err
					}
					break
				}
				batch, fresh = append(batch, w.decodeTrail(m)), fresh+1
				flushed = flushed || batch[len(batch)-1].flush
			}
			batch, carried = w.due(batch, time.Now(), fresh >= maxTrailBatch)
			floor.carry(carried)
			w.processTrails(work, batch, floor, kept)
			if broken != nil && ctx.Err() == nil {
				w.report(nil, "", fmt.Errorf("events: %s: read: %w", w.durable, broken))
				break // read anew; what was left for later stays
			}
		}
		if ctx.Err() != nil {
			w.drainTrails(work, it, floor, carried, kept)
			return nil
		}
		it.Stop()
	}
	return nil
}

// due splits a gathered batch into the trails to handle now and those
// to leave for a later batch, each in the order they arrived. A run's
// trails go together: now when one of them flushes or the oldest has
// waited the linger, later otherwise. A trail that names no run (one
// that fails to decode included) goes now, and so does every trail when
// the batch read as many messages as one batch may (full): a reader with
// a backlog takes it whole.
func (w *Worker) due(batch []*trailMsg, now time.Time, full bool) (ready, later []*trailMsg) {
	if full {
		return batch, nil
	}
	runDue := map[string]bool{}
	for _, it := range batch {
		if it.run != "" && !runDue[it.run] {
			runDue[it.run] = it.flush || now.Sub(it.at) >= w.cfg.Linger
		}
	}
	for _, it := range batch {
		if it.run == "" || runDue[it.run] {
			ready = append(ready, it)
		} else {
			later = append(later, it)
		}
	}
	return ready, later
}

// drainTrails stops pulling and handles the trails it had left for a
// later batch and what the reader was already delivered: left unhandled,
// those messages would hold the next reader's acknowledgements until
// their redelivery, an ack wait later.
func (w *Worker) drainTrails(ctx context.Context, it jetstream.MessagesContext, floor *ackFloor, carried []*trailMsg, kept *keptGoroutines) {
	it.Drain()
	batch := carried
	floor.carry(nil)
	for {
		m, err := it.Next(jetstream.NextMaxWait(CallTimeout))
		if err != nil {
			break
		}
		batch = append(batch, w.decodeTrail(m))
	}
	if len(batch) > 0 {
		w.processTrails(ctx, batch, floor, kept)
	}
}

// unpin hands the consumer on at shutdown: another process's reader takes
// it at once instead of after SinglePinnedTTL.
func (w *Worker) unpin(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	st, err := w.js.Stream(ctx, w.stream)
	if err == nil {
		err = st.UnpinConsumer(ctx, w.durable, SingleGroup)
	}
	if err != nil {
		w.report(nil, "", fmt.Errorf("events: %s: unpin: %w", w.durable, err))
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// trailMsg is one message of a batch being handled.
type trailMsg struct {
	msg   jetstream.Msg
	at    time.Time // when it was received
	run   string    // its run (tenant and run id), "" if it names none
	flush bool      // its trail holds an event that ends a batch's gathering (FlushOn)
	md    *jetstream.MsgMetadata
	evs   []event.Event
	outs  []event.Event
	d     *deferred
	err   error
	final bool // handled, or dead-lettered: nothing more to do
}

// decodeTrail reads a message's metadata and trail; what fails is
// settled by processTrails.
func (w *Worker) decodeTrail(msg jetstream.Msg) *trailMsg {
	it := &trailMsg{msg: msg, at: time.Now()}
	if it.md, it.err = msg.Metadata(); it.err != nil {
		return it
	}
	if it.evs, it.err = Trail(msg.Headers(), msg.Subject(), msg.Data()); it.err == nil {
		it.err = trailTenants(msg.Subject(), it.evs)
	}
	if it.err == nil && len(it.evs) > 0 {
		if run := Ext(it.evs[0], ExtRun); run != "" {
			it.run = Ext(it.evs[0], ExtTenant) + "/" + run
		}
		it.flush = w.cfg.FlushOn != nil && slices.ContainsFunc(it.evs, w.cfg.FlushOn)
	}
	return it
}

// processTrails handles a batch: every message's trail through the
// handler, Concurrency messages at once (each message's events in order,
// each message with its own deferred waits, so the handlers queue the
// whole batch before the first wait writes it), then each message's
// outputs and waits, in order; then it acknowledges what it can and
// redelivers what failed. Both run on kept's goroutines.
func (w *Worker) processTrails(ctx context.Context, items []*trailMsg, floor *ackFloor, kept *keptGoroutines) {
	sem := make(chan struct{}, w.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		if it.md == nil {
			w.report(nil, it.msg.Subject(), it.err)
			_ = it.msg.Term()
			it.final = true
			continue
		}
		if it.err != nil {
			w.deadLetterTrail(ctx, it, it.err)
			continue
		}
		if len(it.evs) == 0 {
			it.final = true // a message that carries no trail
			continue
		}
		it.d = &deferred{}
		sem <- struct{}{}
		kept.Go(&wg, func() {
			defer func() { <-sem }()
			hctx := withCarrier(context.WithValue(ctx, deferredKey{}, it.d), it.msg.Subject(), it.msg.Data())
			it.outs, it.err = w.handleBatch(hctx, it.evs)
		})
	}
	wg.Wait()
	// Every message's waits at once: whichever handler's write leads the
	// group commit must not wait behind one that waits for it.
	for _, it := range items {
		if it.d == nil {
			continue
		}
		kept.Go(&wg, func() {
			if it.err == nil {
				it.err = w.pub.PublishAll(ctx, it.outs)
			}
			if err := it.d.wait(ctx); it.err == nil {
				it.err = err
			}
			switch {
			case it.err == nil:
				it.final = true
			case IsPermanent(it.err):
				w.deadLetterTrail(ctx, it, it.err)
			default:
				w.report(&it.evs[0], it.msg.Subject(), it.err)
			}
			w.done(it)
		})
	}
	wg.Wait()
	floor.settle(ctx, items)
}

// done tells OnDone how a message with a trail ended.
func (w *Worker) done(it *trailMsg) {
	if w.cfg.OnDone == nil {
		return
	}
	outcome := Acked
	switch {
	case it.err != nil && !it.final:
		outcome = Retried
	case it.err != nil:
		outcome = DeadLettered
	}
	outs := it.outs
	if outcome != Acked {
		outs = nil
	}
	w.cfg.OnDone(&it.evs[0], outs, outcome, 0)
}

// trailTenants checks that every event of a trail names the tenant of the
// subject its message was published on.
func trailTenants(subject string, evs []event.Event) error {
	for _, e := range evs {
		if subj, ext := TenantOfSubject(subject), MetaOf(e).Tenant; subj != ext {
			return Permanent(fmt.Errorf("%w: subject %s names tenant %q, its trail's event %s tenantid %q",
				ErrInvalidData, subject, subj, e.ID(), ext))
		}
	}
	return nil
}

// deadLetterTrail dead-letters a trail that cannot be indexed. Its
// message was handled by its own role: the dead letter says so (Trail),
// so no run is ended for it, and its id is the trail's own.
func (w *Worker) deadLetterTrail(ctx context.Context, it *trailMsg, reason error) {
	w.report(nil, it.msg.Subject(), reason)
	dl := DeadLetterEvent(w.cfg.Role, it.md.Stream, it.md.Sequence.Stream, it.md.NumDelivered, it.msg.Subject(),
		it.msg.Headers(), it.msg.Data(), reason.Error(), false)
	dl.SetID(DeriveID(fmt.Sprintf("%s/%d", it.md.Stream, it.md.Sequence.Stream), "dead-trail"))
	var data DeadLetter
	if err := Decode(dl, &data); err == nil {
		data.Trail = true
		_ = dl.SetData(event.ApplicationJSON, data)
	}
	if err := Publish(ctx, w.js, dl); err != nil {
		w.report(nil, it.msg.Subject(), err) // not final: redelivered
		it.err = err
		return
	}
	it.err, it.final = reason, true
}

// ackFloor is the cumulative acknowledgement of a Single consumer: the
// stream sequence up to which every message has been handled. Only the
// messages of the stream's sequences the reader itself handled, or that
// the stream no longer holds, are passed: a message handed to a reader
// before a failover, still unacknowledged, holds the floor until it comes
// back and is handled, so an AckAll never acknowledges a message nobody
// handled.
type ackFloor struct {
	w       *Worker
	acked   uint64                   // every message up to it is acknowledged
	ready   map[uint64]jetstream.Msg // handled, not yet acknowledged, by stream sequence
	failed  map[uint64]bool          // redelivered after a failure, not handled since
	carried map[uint64]bool          // received, left for a later batch
}

func (w *Worker) newAckFloor(ctx context.Context) (*ackFloor, error) {
	info, err := w.cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("events: consumer info: %w", err)
	}
	acked := info.AckFloor.Stream
	if st, err := w.js.Stream(ctx, w.stream); err == nil {
		if first := st.CachedInfo().State.FirstSeq; first > 0 {
			acked = max(acked, first-1) // what the stream dropped needs no handling
		}
	}
	return &ackFloor{w: w, acked: acked, ready: map[uint64]jetstream.Msg{}, failed: map[uint64]bool{}}, nil
}

// carry records the trails left for a later batch: the floor waits for
// them without asking the stream whether it still holds them.
func (f *ackFloor) carry(items []*trailMsg) {
	clear(f.carried)
	for _, it := range items {
		if it.md != nil {
			if f.carried == nil {
				f.carried = map[uint64]bool{}
			}
			f.carried[it.md.Sequence.Stream] = true
		}
	}
}

// settle books a batch's outcomes: handled messages join the floor's
// ready set, failed ones are redelivered after a backoff; then the floor
// moves up as far as it can and is acknowledged.
func (f *ackFloor) settle(ctx context.Context, items []*trailMsg) {
	for _, it := range items {
		if it.md == nil {
			continue
		}
		seq := it.md.Sequence.Stream
		if seq <= f.acked {
			if it.err == nil || it.final {
				_ = it.msg.Ack() // a redelivery of an acknowledged message
			}
			continue
		}
		if it.final {
			delete(f.failed, seq)
			f.ready[seq] = it.msg
			continue
		}
		f.failed[seq] = true
		_ = it.msg.NakWithDelay(f.w.backoff(it.md.NumDelivered))
	}
	f.advance(ctx)
}

// advance moves the floor over every sequence that is ready or that the
// stream no longer holds, and acknowledges the last ready message passed.
func (f *ackFloor) advance(ctx context.Context) {
	if len(f.ready) == 0 || f.carried[f.acked+1] {
		return
	}
	seqs := slices.Sorted(maps.Keys(f.ready))
	var last jetstream.Msg
	next := f.acked + 1
	for _, seq := range seqs {
		for ; next < seq; next++ {
			if f.failed[next] || f.carried[next] || f.held(ctx, next) {
				f.ack(last, next-1)
				return
			}
		}
		last, next = f.ready[seq], seq+1
	}
	f.ack(last, next-1)
}

// held reports whether the stream still holds the message of seq: then
// it is unacknowledged and was not handled here, so the floor waits for
// it. A sequence the stream dropped (expired, or a fired schedule's) is
// passed.
func (f *ackFloor) held(ctx context.Context, seq uint64) bool {
	st, err := f.w.js.Stream(ctx, f.w.stream)
	if err != nil {
		return true
	}
	if _, err := st.GetMsg(ctx, seq); errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	return true
}

// ack acknowledges everything up to seq with last, the message of seq,
// and drops what it passed from the ready set.
func (f *ackFloor) ack(last jetstream.Msg, seq uint64) {
	if last == nil || seq <= f.acked {
		return
	}
	if err := last.Ack(); err != nil {
		f.w.report(nil, last.Subject(), fmt.Errorf("events: ack: %w", err))
		return
	}
	for s := range f.ready {
		if s <= seq {
			delete(f.ready, s)
		}
	}
	f.acked = seq
}
