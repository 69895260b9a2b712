package events

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
)

// Handler is the one shape of every role: consume one event, do one unit of
// work, return the events to emit. The runtime publishes every returned
// event and sees its PubAck before it acks the input. A nil error acks; a
// Permanent error dead-letters; any other error redelivers with backoff.
type Handler func(ctx context.Context, ev event.Event) ([]event.Event, error)

// Middleware wraps a Handler with a cross-cutting concern.
type Middleware func(Handler) Handler

// Chain applies middleware so that the first one is outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// WorkerConfig configures a Worker. Zero values take defaults.
type WorkerConfig struct {
	Role        string          // role name, used in dead letters
	Concurrency int             // messages handled at once; default 16
	Heartbeat   time.Duration   // InProgress interval; default a third of the consumer's AckWait
	Backoff     []time.Duration // redelivery delays after a transient error; default 1s, 2s, 5s, 10s, 30s
	DrainWait   time.Duration   // how long shutdown waits for in-flight messages; default 30s
	// OnError reports what the worker cannot return: failed handlers,
	// dead letters and acks. It must not block. Optional.
	OnError func(ev *event.Event, subject string, err error)
	// OnDone, when set, is told how each message ended (Acked, Retried,
	// DeadLettered or Dropped; ev is nil for one that did not decode), the
	// outputs an acked message stored, and how long its handling took. It
	// must not block.
	OnDone func(ev *event.Event, outs []event.Event, outcome string, took time.Duration)
	// StallCheck is how often the worker checks that its consumption has
	// not stalled (see Run); default 2 × PullExpiry.
	StallCheck time.Duration
	// OnSlow, when set, is told once of each message still being handled
	// (its handler, publish or deferred waits) SlowAfter after it started,
	// at the first heartbeat past it.
	// Its heartbeats keep such a message from redelivery until the
	// handler's deadline, so a hop that hangs would otherwise show only as
	// a run that never ends. It must not block.
	OnSlow func(ev event.Event, held time.Duration)
	// SlowAfter is when OnSlow is told; default 3 × CallTimeout.
	SlowAfter time.Duration
	// Trails makes the worker hand its handler the audit trail each
	// message carries (Trail), in order, instead of the message's own
	// event; a message with no trail is acked unhandled. The projector's
	// worker reads AGENT this way. Its consumer must be a
	// Consumer.Single: the worker reads it in batches and acknowledges
	// them cumulatively.
	Trails bool
	// RoutesDecode declares that the handler dispatches every event to a
	// route that decodes its data strictly (On), which rejects data that
	// is not JSON as the worker would: the worker then leaves that check
	// to the decode, and a hop reads its input's data once, not twice.
	// A route's handler still never sees data that does not decode.
	// Without it, the worker checks the data before the handler sees it.
	RoutesDecode bool
	// Linger is how long a trail reader gathers a batch after its first
	// message; default TrailLinger.
	Linger time.Duration
	// FlushOn, when set, ends a trail reader's gathering when a trail
	// holds an event it reports, with the messages that have already
	// arrived: what callers wait for is written without the linger.
	FlushOn func(event.Event) bool
}

// PullExpiry bounds each pull request of a worker (and of a run client's
// results consumer); the server sends heartbeats every half of it. On a
// cluster, when the node serving a consumer dies, the pull it held is lost
// without a word, and the missed heartbeats are how the client notices:
// with this bound it pulls again from the new leader within seconds,
// instead of after the default 30.
const PullExpiry = 5 * time.Second

// Outcomes of a handled message (WorkerConfig.OnDone).
const (
	// Acked: handled, its outputs stored, acknowledged.
	Acked = "acked"
	// Retried: a transient failure; redelivered after a backoff.
	Retried = "retried"
	// DeadLettered: invalid, or out of deliveries; a dead letter holds it.
	DeadLettered = "dead_lettered"
	// Dropped: not a JetStream message (no metadata); terminated.
	Dropped = "dropped"
)

// Worker runs a Handler on a durable pull consumer.
type Worker struct {
	js       jetstream.JetStream
	pub      *Publisher
	cons     jetstream.Consumer
	handler  Handler
	cfg      WorkerConfig
	stream   string
	durable  string
	maxDeliv int
}

// NewWorker returns a worker that feeds the messages of cons to h.
func NewWorker(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, h Handler, cfg WorkerConfig) (*Worker, error) {
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("events: consumer info: %w", err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = info.Config.AckWait / 3
	}
	if len(cfg.Backoff) == 0 {
		cfg.Backoff = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}
	}
	if cfg.DrainWait <= 0 {
		cfg.DrainWait = 30 * time.Second
	}
	if cfg.StallCheck <= 0 {
		cfg.StallCheck = 2 * PullExpiry
	}
	if cfg.SlowAfter <= 0 {
		cfg.SlowAfter = 3 * CallTimeout
	}
	if cfg.Role == "" {
		cfg.Role = info.Name
	}
	if cfg.Linger <= 0 {
		cfg.Linger = TrailLinger
	}
	return &Worker{js: js, pub: NewPublisher(js), cons: cons, handler: h, cfg: cfg, stream: info.Stream, durable: info.Name, maxDeliv: info.Config.MaxDeliver}, nil
}

// Run consumes until ctx is cancelled, then stops pulling, waits up to
// DrainWait for the messages in flight and returns. Messages not finished
// by then are redelivered to another worker.
//
// Run also watches its consumption: every StallCheck, when it has received
// nothing since the last check and has room for more, it asks the server
// whether work is waiting (messages undelivered, or more awaiting an ack
// than it is handling) while no pull request of any worker of the consumer
// is; then it stops its consumption and consumes anew. On a cluster, after
// a consumer's leader changed, the client library's consumption was seen
// to stop pulling for good (every role's consumer without a waiting pull,
// messages pending), and nothing else would restart it.
func (w *Worker) Run(ctx context.Context) error {
	if w.cfg.Trails {
		return w.runTrails(ctx)
	}
	stopAdvisories, err := w.watchMaxDeliveries(ctx)
	if err != nil {
		return err
	}
	defer stopAdvisories()

	// Handlers run on a context that outlives ctx by DrainWait, so a
	// SIGTERM lets in-flight work finish instead of cutting it.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	// A fixed pool of handler goroutines, not one per message: a hop's
	// handler grows its goroutine's stack to tens of KiB, and a fresh
	// goroutine copied its stack as it grew, every message (about 5 % of
	// the process's CPU in a profile at concurrency 64).
	jobs, quit := make(chan jetstream.Msg), make(chan struct{})
	var (
		wg       sync.WaitGroup
		busy     atomic.Int64 // messages being handled, for the stall check
		received atomic.Int64 // messages received, for the stall check
		handing  atomic.Int64 // callbacks handing a message to the pool
	)
	flights := newFlights(w)
	for range w.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case msg := <-jobs:
					w.process(work, msg, flights)
					busy.Add(-1)
				case <-quit:
					return
				}
			}
		}()
	}
	stopBeats := flights.beat()
	defer stopBeats()
	consume := func() (jetstream.ConsumeContext, error) {
		return w.cons.Consume(func(msg jetstream.Msg) {
			handing.Add(1)
			defer handing.Add(-1)
			received.Add(1)
			busy.Add(1)
			select {
			case jobs <- msg:
			case <-quit:
				// A consumption stopped late delivered after shutdown:
				// left unacked, the message is redelivered.
				busy.Add(-1)
			}
		}, jetstream.PullMaxMessages(w.cfg.Concurrency), jetstream.PullExpiry(PullExpiry), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			w.report(nil, "", err)
		}))
	}
	cc, err := consume()
	if err != nil {
		return fmt.Errorf("events: consume %s: %w", w.durable, err)
	}
	watch, stopWatch := context.WithCancel(ctx)
	watched := make(chan jetstream.ConsumeContext, 1)
	go func() { watched <- w.watchStalls(watch, cc, consume, &received, &busy) }()
	<-ctx.Done()
	stopWatch()
	cc = <-watched // the consumption in use once the watch has ended
	cc.Drain()
	done := make(chan struct{})
	go func() {
		// Drain still hands the messages already buffered to the callback;
		// wait until it has, and until no callback still waits for a
		// goroutine of the pool to take its message (every one busy),
		// before the pool is told to quit.
		<-cc.Closed()
		for handing.Load() > 0 {
			time.Sleep(time.Millisecond)
		}
		close(quit)
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(w.cfg.DrainWait):
		cancelWork()
		<-done
	}
	return nil
}

// watchStalls checks the consumption cc every StallCheck until ctx ends
// (see Run), restarting it with consume when it stalled, and returns the
// consumption in use.
func (w *Worker) watchStalls(ctx context.Context, cc jetstream.ConsumeContext, consume func() (jetstream.ConsumeContext, error),
	received, handling *atomic.Int64) jetstream.ConsumeContext {
	t := time.NewTicker(w.cfg.StallCheck)
	defer t.Stop()
	seen := received.Load()
	for {
		select {
		case <-ctx.Done():
			return cc
		case <-t.C:
		}
		now := received.Load()
		busy := int(handling.Load())
		if now != seen || busy >= w.cfg.Concurrency {
			seen = now
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, CallTimeout)
		info, err := w.cons.Info(ictx)
		cancel()
		if err != nil || info.NumWaiting > 0 || info.NumPending == 0 && info.NumAckPending <= busy {
			continue // not stalled, or the server cannot say
		}
		next, err := consume()
		if err != nil {
			w.report(nil, "", fmt.Errorf("events: %s consumed nothing for %s with %d messages pending: consuming anew: %w",
				w.durable, w.cfg.StallCheck, info.NumPending+uint64(info.NumAckPending), err))
			continue
		}
		cc.Stop()
		closed := make(chan struct{})
		go func(old jetstream.ConsumeContext) { <-old.Closed(); close(closed) }(cc)
		select { // no late delivery of the stopped one races the drain
		case <-closed:
		case <-time.After(CallTimeout):
		}
		cc = next
		w.report(nil, "", fmt.Errorf("events: %s consumed nothing for %s with %d messages pending and no pull waiting: consuming anew",
			w.durable, w.cfg.StallCheck, info.NumPending+uint64(info.NumAckPending)))
	}
}

func (w *Worker) report(ev *event.Event, subject string, err error) {
	if w.cfg.OnError != nil && err != nil {
		w.cfg.OnError(ev, subject, err)
	}
}

// process handles one message: decode, handle with heartbeats, publish
// every output, then ack. It never returns an error: every outcome is an
// ack, a delayed nak, or a dead letter followed by a term.
func (w *Worker) process(ctx context.Context, msg jetstream.Msg, flights *flights) {
	start := time.Now()
	var (
		ev      event.Event
		outs    []event.Event
		decoded bool
		outcome = Acked
	)
	if w.cfg.OnDone != nil {
		defer func() {
			var e *event.Event
			if decoded {
				e = &ev
			}
			if outcome != Acked {
				outs = nil
			}
			w.cfg.OnDone(e, outs, outcome, time.Since(start))
		}()
	}
	md, err := msg.Metadata()
	if err != nil {
		outcome = Dropped
		w.report(nil, msg.Subject(), err)
		_ = msg.Term()
		return
	}
	var batch []event.Event
	if w.cfg.Trails {
		batch, err = Trail(msg.Headers(), msg.Subject(), msg.Data())
	} else {
		batch, err = fromMsgs(msg.Headers(), msg.Data(), !w.cfg.RoutesDecode)
	}
	if err != nil {
		outcome = w.deadLetter(ctx, msg, md, nil, err)
		return
	}
	if len(batch) == 0 { // a message that carries no trail
		if err := msg.Ack(); err != nil {
			w.report(nil, msg.Subject(), fmt.Errorf("events: ack: %w", err))
		}
		return
	}
	ev, decoded = batch[0], true
	for _, e := range batch {
		if subj, ext := TenantOfSubject(msg.Subject()), MetaOf(e).Tenant; subj != ext {
			// Isolation never rests on a header alone: the subject a
			// publisher was allowed to use must name the same tenant.
			outcome = w.deadLetter(ctx, msg, md, &ev, Permanent(fmt.Errorf("%w: subject %s names tenant %q, the event's tenantid is %q",
				ErrInvalidData, msg.Subject(), subj, ext)))
			return
		}
	}
	stop := flights.add(msg, ev)
	d := &deferred{}
	hctx := context.WithValue(ctx, deferredKey{}, d)
	if w.cfg.Trails {
		hctx = withCarrier(hctx, msg.Subject(), msg.Data())
	}
	if len(batch) == 1 {
		outs, err = w.handle(hctx, ev)
	} else {
		outs, err = w.handleBatch(hctx, batch)
	}
	if err == nil {
		err = w.pub.PublishAll(ctx, outs)
	}
	// The handlers' deferred waits (Defer) end the hop: after the
	// publish, so their writes overlap it, and before the ack, so what
	// they store is stored before the input is acknowledged. They run
	// even after a failure (a wait may owe other messages a write); a
	// failed one fails the hop like a handler error.
	if werr := d.wait(ctx); err == nil {
		err = werr
	}
	stop()
	switch {
	case err == nil:
		// A plain ack: if it is lost, the redelivery re-emits the same
		// derived ids, which the duplicate window drops.
		if err := msg.Ack(); err != nil {
			w.report(&ev, msg.Subject(), fmt.Errorf("events: ack: %w", err))
		}
	case IsPermanent(err):
		outcome = w.deadLetter(ctx, msg, md, &ev, err)
	case w.maxDeliv > 0 && int(md.NumDelivered) >= w.maxDeliv:
		outcome = w.deadLetter(ctx, msg, md, &ev, exhausted{fmt.Errorf("max deliveries (%d) reached: %w", w.maxDeliv, err)})
	default:
		outcome = Retried
		w.report(&ev, msg.Subject(), err)
		_ = msg.NakWithDelay(w.backoff(md.NumDelivered))
	}
}

// handleBatch handles the events of a batch in order; the first error
// fails the batch: it is retried, or dead-lettered whole, as one event
// would be. The waits the handlers deferred (see Defer) are run by
// process, for the whole batch.
func (w *Worker) handleBatch(ctx context.Context, batch []event.Event) ([]event.Event, error) {
	var outs []event.Event
	for _, e := range batch {
		o, err := w.handle(ctx, e)
		if err != nil {
			return outs, fmt.Errorf("%s %s: %w", e.Type(), e.ID(), err)
		}
		outs = append(outs, o...)
	}
	return outs, nil
}

// handle runs the handler on ev under profile labels naming the worker's
// role and ev's type, added to those of ctx: a CPU profile of any process
// splits by hop (go tool pprof -tagfocus=event=io.agentbus.step.iterated).
func (w *Worker) handle(ctx context.Context, ev event.Event) (outs []event.Event, err error) {
	pprof.Do(ctx, pprof.Labels("role", w.cfg.Role, "event", ev.Type()), func(ctx context.Context) {
		outs, err = w.handler(ctx, ev)
	})
	return outs, err
}

func (w *Worker) backoff(delivered uint64) time.Duration {
	i := int(delivered) - 1
	if i >= len(w.cfg.Backoff) {
		i = len(w.cfg.Backoff) - 1
	}
	return w.cfg.Backoff[max(i, 0)]
}

// Publish publishes ev with Nats-Msg-Id = its id and waits for the PubAck,
// at most CallTimeout. A PubAck that reports a duplicate is success: the
// event is stored.
func Publish(ctx context.Context, js jetstream.JetStream, ev event.Event) error {
	_, err := PublishOnce(ctx, js, ev)
	return err
}

// PublishOnce is Publish that also reports whether the stream already
// held an event of that id (its PubAck says duplicate): the event was
// stored earlier, and this publication stored nothing.
func PublishOnce(ctx context.Context, js jetstream.JetStream, ev event.Event) (duplicate bool, err error) {
	m, err := ToMsg(ev)
	if err != nil {
		return false, Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout) // a PubAck lost with a dying server
	defer cancel()
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return false, fmt.Errorf("%w: %s %s: %v", ErrPublish, m.Subject, ev.ID(), err)
	}
	return ack.Duplicate, nil
}

// deadLetter moves a message that cannot be handled to agent.dead.<tenant>
// with its reason and original bytes, then terminates it. A dead letter
// that itself fails is terminated without another dead letter, so nothing
// loops. It returns the message's outcome: DeadLettered; Dropped for a
// failed dead letter; Retried when the dead letter could not be stored.
func (w *Worker) deadLetter(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, ev *event.Event, reason error) (outcome string) {
	w.report(ev, msg.Subject(), reason)
	if ev != nil && ev.Type() == TypeDeadLettered {
		_ = msg.TermWithReason(reason.Error())
		return Dropped
	}
	var ex exhausted
	dl := DeadLetterEvent(w.cfg.Role, md.Stream, md.Sequence.Stream, md.NumDelivered, msg.Subject(), msg.Headers(), msg.Data(),
		reason.Error(), errors.As(reason, &ex))
	if err := Publish(ctx, w.js, dl); err != nil {
		// Without a dead letter the message must not vanish: redeliver.
		w.report(ev, msg.Subject(), err)
		_ = msg.NakWithDelay(w.backoff(md.NumDelivered))
		return Retried
	}
	_ = msg.TermWithReason(truncate(reason.Error(), 200))
	return DeadLettered
}

// DeadLetterEvent builds the dead letter of a stored message. Its id is
// derived from the stream and sequence, so the runtime and the
// MAX_DELIVERIES advisory watcher never dead-letter the same message twice.
// Exhausted says the message ran out of deliveries on transient errors
// rather than being invalid.
func DeadLetterEvent(role, stream string, seq, deliveries uint64, subject string, headers map[string][]string, data []byte, reason string, exhausted bool) event.Event {
	tenant := TenantOfSubject(subject)
	runID := ""
	for k, v := range headers {
		if len(v) > 0 && strings.EqualFold(k, headerPrefix+ExtRun) {
			runID = v[0]
		}
	}
	dl := DeadLetter{
		Reason: reason, Subject: subject, Stream: stream, StreamSeq: seq, Deliveries: deliveries,
		RunID: runID, Headers: headers, Original: data, Exhausted: exhausted,
	}
	ev, err := New(DeriveID(fmt.Sprintf("%s/%d", stream, seq), "dead"), TypeDeadLettered,
		Meta{Tenant: tenant, Run: runID, SourceProcess: role}, dl)
	if err != nil {
		// DeadLetter always marshals; keep the event well formed regardless.
		_ = ev.SetData(event.ApplicationJSON, map[string]string{"reason": reason})
	}
	return ev
}

// exhausted marks the reason of a message dead-lettered after its last
// delivery failed transiently.
type exhausted struct{ error }

func (e exhausted) Unwrap() error { return e.error }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
