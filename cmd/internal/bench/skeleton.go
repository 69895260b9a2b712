package bench

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/bench/host"
	"github.com/agentbus/agentbus/events"
)

// The skeleton run: the durable traffic of one 5-step run, made by
// handlers that do nothing else: no decoding, no model, no skill, no
// checks. Its runs/s, beside agentbus's at the same concurrency, splits
// the gap to a peer into what the messages cost the broker and the
// clients, and what agentbus's own work costs on top.
//
// A hop of the chain pulls its input from one stream, reads its share of
// the run's KV records at once, writes its share one after another (the
// run's budget entry by compare-and-set), publishes its audit message and
// its output (PubAcks awaited) and acks. A projector pulls the audit
// messages and writes the store's copies and projections. The client
// learns of a run's end as the server routes its last output, before that
// is stored, and starts its next run while the last hop still finishes:
// anything that flatters the skeleton only makes it a safer bound.
const (
	skelHops       = 18
	skelHopBytes   = 3725 // an AGENT message
	skelAuditSize  = 3087 // an AUDIT message (a hop's trail)
	skelEventSize  = 1705 // the store's copy of a hop's trail
	skelMemorySize = 6693 // a memory record with its embedding
	// Today's run (skelToday), measured on a run of the pipeline's:
	// an AGENT message's body and the trail in its header, averaged over
	// the chain's hops, and the store's copy of the run's trail (one
	// append a run).
	skelTodayBytes   = 4070
	skelTodayTrail   = 2282
	skelTodayEvents  = 30690
	skelLargestBytes = skelTodayEvents
)

// skelWrite is a KV write or read a run makes: its bucket, count and
// value size.
type skelWrite struct {
	bucket string
	count  int
	size   int
}

// skelTraffic is what a skeleton run sends.
type skelTraffic struct {
	name       string
	hopWrites  []skelWrite // budgets are compare-and-set on one key a run
	hopReads   []skelWrite // of a key written at setup
	projWrites []skelWrite // besides the store's copies of the audit messages
	copies     int         // store copies of the 18 audit messages
	extras     int         // outputs besides the chain's (a scheduled check)
	// trail, when set, is the bytes of the audit trail each hop's output
	// carries in a header instead of an audit message of its own: the
	// projector then reads the chain's stream itself, in batches, and
	// acknowledges each batch once; all of a run's copies and projection
	// writes fall on its last output.
	trail int
	body  int // the bytes of a hop's output, skelHopBytes if 0
}

// hopBytes is the size of a hop's output.
func (t skelTraffic) hopBytes() int { return cmp.Or(t.body, skelHopBytes) }

// copySize is the size of a store copy: one audit message's, or with
// trails in the headers, the run's whole trail appended at once.
func (t skelTraffic) copySize() int {
	if t.trail > 0 {
		return skelTodayEvents
	}
	return skelEventSize
}

var (
	// skelCensus is a sequential run's census as agentbus made it before
	// issue 34's changes (2026-11-26, `agentbus bench`), at the sizes
	// measured then: the traffic those changes cut (see the census that
	// `make bench` prints for today's).
	skelCensus = skelTraffic{name: "census",
		hopWrites: []skelWrite{{"budgets", 26, 378}, {"locks", 10, 34}, {"sessions", 1, 828},
			{"executions", 1, 792}, {"memory", 6, skelMemorySize}, {"toolcalls", 5, 934}},
		hopReads:   []skelWrite{{"config", 3, 512}, {"sessions", 1, 828}, {"memory", 9, skelMemorySize}, {"souls", 2, 512}, {"toolcalls", 5, 934}},
		projWrites: []skelWrite{{"plans", 7, 2412}, {"ssessions", 1, 792}},
		copies:     16, extras: 2}
	// skelMinimum is less than the design lets a run send, so its
	// figures bound what any agentbus could reach: a message per
	// iteration and an audit message per hop; a budget compare-and-set
	// per model or tool call (13 + 5) and none to settle; no memory
	// locks; the step outputs and the exchange written, and read once
	// each by the step that needs them and the synthesis; an idempotency
	// record per skill call; no configuration, soul or session read
	// (all cached); the audit trail indexed where it lies (no store
	// copies); a plan projected twice and the session once.
	skelMinimum = skelTraffic{name: "minimum",
		hopWrites:  []skelWrite{{"budgets", 18, 378}, {"memory", 6, skelMemorySize}, {"toolcalls", 5, 934}},
		hopReads:   []skelWrite{{"memory", 9, skelMemorySize}},
		projWrites: []skelWrite{{"plans", 2, 2412}, {"ssessions", 1, 792}}}
	// skelToday is a sequential run's census as agentbus makes it now
	// (docs/PERFORMANCE.md, the census table): each hop's output carries
	// its trail, the projector reads the chain in batches and appends a
	// run's trail to the store at once; six memory writes and two
	// session-queue writes; the run configuration, soul, session and
	// session queue read; the plan, execution and session written once
	// each. It is what handlers doing nothing but agentbus's traffic
	// would reach.
	skelToday = skelTraffic{name: "today",
		hopWrites:  []skelWrite{{"memory", 6, skelMemorySize}, {"squeue", 2, 96}},
		hopReads:   []skelWrite{{"config", 1, 512}, {"souls", 1, 512}, {"sessions", 1, 828}, {"squeue", 2, 96}},
		projWrites: []skelWrite{{"plans", 1, 2412}, {"executions", 1, 792}, {"ssessions", 1, 792}},
		copies:     1, extras: 2, trail: skelTodayTrail, body: skelTodayBytes}
)

// skelOps spreads list evenly over the chain's hops: what hop h reads or
// writes.
func skelOps(list []skelWrite) [skelHops][]skelWrite {
	var out [skelHops][]skelWrite
	i := 0
	for _, w := range list {
		for range w.count {
			out[i%skelHops] = append(out[i%skelHops], skelWrite{bucket: w.bucket, size: w.size, count: 1})
			i++
		}
	}
	return out
}

type skeletonRig struct {
	js     jetstream.JetStream
	kv     map[string]jetstream.KeyValue
	hopR   [skelHops][]skelWrite
	hopW   [skelHops][]skelWrite
	projW  [skelHops][]skelWrite
	t      skelTraffic // what the rig sends
	mu     sync.Mutex
	done   map[string]chan struct{}
	failed error // the first hop or projection that failed: the point fails
}

// fail records err, nak's m for a redelivery and reports whether it
// failed.
func (r *skeletonRig) fail(m jetstream.Msg, err error) bool {
	if err == nil {
		return false
	}
	r.mu.Lock()
	if r.failed == nil {
		r.failed = fmt.Errorf("skeleton %s: %w", m.Subject(), err)
	}
	r.mu.Unlock()
	_ = m.Nak()
	return true
}

func (r *skeletonRig) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// bytes is a payload of n bytes: a prefix of one shared filler, since
// the messages' contents do not matter, only their sizes.
func (r *skeletonRig) bytes(n int) []byte {
	return skelFiller[:n]
}

// skelFiller holds the largest payload a skeleton run sends.
var skelFiller = []byte(strings.Repeat("x", skelLargestBytes))

// skeleton measures the skeleton run at concurrency conc for l, after
// warm runs, on its own streams and buckets of srv, the same way
// throughput measures agentbus: a closed loop, ended when its projector
// has caught up, with the process's CPU.
func skeleton(ctx context.Context, srv *benchServer, traffic skelTraffic, tcp bool, conc int, l load, warm int) (Throughput, error) {
	nc, js, err := srv.connect(tcp)
	if err != nil {
		return Throughput{}, err
	}
	defer nc.Close()
	name := fmt.Sprintf("SKEL_%s_%v_%d", strings.ToUpper(traffic.name), tcp, conc)
	r := &skeletonRig{js: js, kv: map[string]jetstream.KeyValue{}, hopR: skelOps(traffic.hopReads), hopW: skelOps(traffic.hopWrites),
		projW: skelOps(traffic.projWrites), t: traffic, done: map[string]chan struct{}{}}
	for _, s := range []string{"", "_AUDIT", "_STORE"} {
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name + s, Subjects: []string{strings.ToLower(name+s) + ".>"},
			Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute}); err != nil {
			return Throughput{}, err
		}
	}
	for _, b := range []string{"budgets", "locks", "sessions", "executions", "memory", "toolcalls", "config", "souls", "plans", "ssessions", "squeue"} {
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: strings.ToLower(name) + "_" + b, Storage: jetstream.FileStorage})
		if err != nil {
			return Throughput{}, err
		}
		r.kv[b] = kv
	}
	for _, rd := range traffic.hopReads { // the keys the hops read
		if _, err := r.kv[rd.bucket].Put(ctx, "read", r.bytes(rd.size)); err != nil {
			return Throughput{}, err
		}
	}
	hops, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "hops", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: strings.ToLower(name) + ".hop.>", MaxAckPending: 1000})
	if err != nil {
		return Throughput{}, err
	}
	projStream, projAck := name+"_AUDIT", jetstream.AckExplicitPolicy
	if traffic.trail > 0 { // the projector reads the chain itself
		projStream, projAck = name, jetstream.AckAllPolicy
	}
	proj, err := js.CreateOrUpdateConsumer(ctx, projStream, jetstream.ConsumerConfig{Durable: "projector", AckPolicy: projAck,
		MaxAckPending: 10000})
	if err != nil {
		return Throughput{}, err
	}
	prefix := strings.ToLower(name)
	sub, err := nc.Subscribe(prefix+".done.*", func(m *nats.Msg) {
		run := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		r.mu.Lock()
		ch := r.done[run]
		delete(r.done, run)
		r.mu.Unlock()
		if ch != nil {
			close(ch)
		}
	})
	if err != nil {
		return Throughput{}, err
	}
	defer sub.Unsubscribe()
	work := max(conc, 16) // what a role's worker takes at once
	// Pulls expire as agentbus's workers' do (events.PullExpiry): a pull
	// the server lost is noticed by its missed heartbeats within seconds,
	// not after the default 30 s, past a run's timeout (a c8 in-memory
	// point of a `make bench` lost its eight runs in flight that way).
	hc, err := hops.Consume(func(m jetstream.Msg) { go r.hop(ctx, prefix, m) }, jetstream.PullMaxMessages(work), jetstream.PullExpiry(events.PullExpiry))
	if err != nil {
		return Throughput{}, err
	}
	defer hc.Stop()
	handle := func(m jetstream.Msg) { go r.project(ctx, prefix, m) }
	if traffic.trail > 0 {
		batches, stop := make(chan jetstream.Msg, 4*work), make(chan struct{})
		defer close(stop)
		go r.projectBatches(ctx, prefix, batches, stop)
		handle = func(m jetstream.Msg) {
			select {
			case batches <- m:
			case <-stop:
			}
		}
	}
	pc, err := proj.Consume(handle, jetstream.PullMaxMessages(4*work), jetstream.PullExpiry(events.PullExpiry))
	if err != nil {
		return Throughput{}, err
	}
	defer pc.Stop()

	run := func(int) (time.Duration, error) {
		id := strings.ReplaceAll(uuid.NewString(), "-", "")
		ch := make(chan struct{})
		r.mu.Lock()
		r.done[id] = ch
		r.mu.Unlock()
		start := time.Now()
		if _, err := js.Publish(ctx, prefix+".hop.0."+id, r.bytes(r.t.hopBytes()), jetstream.WithMsgID(id)); err != nil {
			return 0, err
		}
		select {
		case <-ch:
			return time.Since(start), nil
		case <-time.After(30 * time.Second):
			if err := r.err(); err != nil {
				return 0, err
			}
			return 0, fmt.Errorf("skeleton run %s did not finish", id)
		}
	}
	if _, _, err := keepInFlight(conc, fixed(warm), run); err != nil { // warm up
		return Throughput{}, err
	}
	if _, err := r.caughtUp(ctx, hops, proj); err != nil {
		return Throughput{}, err
	}
	cpu0 := host.ProcessCPU()
	lat, elapsed, err := keepInFlight(conc, l, run)
	if err != nil {
		return Throughput{}, err
	}
	lag, err := r.caughtUp(ctx, hops, proj)
	if err != nil {
		return Throughput{}, err
	}
	elapsed += lag
	cpu := host.ProcessCPU() - cpu0
	total := len(lat)
	rps := float64(total) / elapsed.Seconds()
	return Throughput{Executors: 1, Concurrency: conc, Runs: total, RunsPerS: rps, HopsPerS: rps * skelHops, Latency: distOf(lat),
		CPUPerRunMS: float64(cpu.Microseconds()) / 1000 / float64(total), ProjectorLagMS: float64(lag.Microseconds()) / 1000}, nil
}

// hop handles hop h of a run (subject <prefix>.hop.<h>.<run>): its reads
// at once, its writes (the budget entry by compare-and-set at the
// revision its input carries), then its audit message and output, then
// the ack.
func (r *skeletonRig) hop(ctx context.Context, prefix string, m jetstream.Msg) {
	t := strings.Split(m.Subject(), ".")
	h, _ := strconv.Atoi(t[len(t)-2])
	run := t[len(t)-1]
	var wg sync.WaitGroup
	for _, rd := range r.hopR[h] {
		wg.Go(func() { _, _ = r.kv[rd.bucket].Get(ctx, "read") })
	}
	wg.Wait()
	rev, _ := strconv.ParseUint(m.Headers().Get("rev"), 10, 64)
	for i, w := range r.hopW[h] {
		var err error
		switch {
		case w.bucket != "budgets":
			_, err = r.kv[w.bucket].Put(ctx, run+"_"+strconv.Itoa(h)+"_"+strconv.Itoa(i), r.bytes(w.size))
		case rev == 0:
			rev, err = r.kv[w.bucket].Create(ctx, run, r.bytes(w.size))
		default:
			rev, err = r.kv[w.bucket].Update(ctx, run, r.bytes(w.size), rev)
		}
		if r.fail(m, err) {
			return
		}
	}
	id := run + "-" + strconv.Itoa(h)
	var pubs []jetstream.PubAckFuture
	next := &nats.Msg{Subject: prefix + ".hop." + strconv.Itoa(h+1) + "." + run, Data: r.bytes(r.t.hopBytes()), Header: nats.Header{}}
	if r.t.trail > 0 {
		next.Header.Set("trail", string(r.bytes(r.t.trail)))
	} else {
		a, err := r.js.PublishMsgAsync(&nats.Msg{Subject: prefix + "_audit." + run, Data: r.bytes(skelAuditSize)}, jetstream.WithMsgID(id))
		if r.fail(m, err) {
			return
		}
		pubs = append(pubs, a)
	}
	if h == skelHops-1 {
		next.Subject = prefix + ".done." + run
	}
	next.Header.Set("rev", strconv.FormatUint(rev, 10))
	o, err := r.js.PublishMsgAsync(next, jetstream.WithMsgID(id+"-out"))
	if r.fail(m, err) {
		return
	}
	pubs = append(pubs, o)
	if h < r.t.extras { // one each on the chain's first hops
		x, err := r.js.PublishMsgAsync(&nats.Msg{Subject: prefix + ".extra." + run, Data: r.bytes(r.t.hopBytes())}, jetstream.WithMsgID(id+"-x"))
		if r.fail(m, err) {
			return
		}
		pubs = append(pubs, x)
	}
	for _, f := range pubs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			r.fail(m, err)
			return
		}
	}
	_ = m.Ack()
}

// project stores the copy of an audit message and its share of the
// projections, then acks.
func (r *skeletonRig) project(ctx context.Context, prefix string, m jetstream.Msg) {
	md, err := m.Metadata()
	if r.fail(m, err) {
		return
	}
	seq := md.Sequence.Stream
	if r.fail(m, r.projectOne(ctx, prefix, int(seq%skelHops), strconv.FormatUint(seq, 10))) {
		return
	}
	_ = m.Ack()
}

// projectOne stores what falls on hop h's audit message (or on a run's
// last output, with trails in the headers, every hop's share): its share
// of the store copies and of the projection writes, under keys prefixed
// by key.
func (r *skeletonRig) projectOne(ctx context.Context, prefix string, h int, key string) error {
	if h < r.t.copies {
		if _, err := r.js.Publish(ctx, prefix+"_store."+strconv.Itoa(h), r.bytes(r.t.copySize())); err != nil {
			return err
		}
	}
	for i, w := range r.projW[h] {
		if _, err := r.kv[w.bucket].Put(ctx, key+"_"+strconv.Itoa(i), r.bytes(w.size)); err != nil {
			return err
		}
	}
	return nil
}

// projectBatches is the projector of a traffic whose trails ride in the
// chain's headers: it takes every message that has arrived at once (as
// agentbus's trail reader does), stores each finished run's copy and
// projections, and acknowledges the batch with its last message
// (AckAll).
func (r *skeletonRig) projectBatches(ctx context.Context, prefix string, in <-chan jetstream.Msg, stop <-chan struct{}) {
	for {
		var batch []jetstream.Msg
		select {
		case m := <-in:
			batch = append(batch, m)
		case <-stop:
			return
		}
	gather:
		for len(batch) < cap(in) {
			select {
			case m := <-in:
				batch = append(batch, m)
			default:
				break gather
			}
		}
		var err error
		for _, m := range batch {
			run, last := strings.CutPrefix(m.Subject(), prefix+".done.")
			if !last {
				continue
			}
			// A run's last output: its trail appended to the store and
			// its projections written, all at once.
			for h := range skelHops {
				if err = r.projectOne(ctx, prefix, h, run+"_"+strconv.Itoa(h)); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if last := batch[len(batch)-1]; !r.fail(last, err) {
			_ = last.Ack()
		}
	}
}

// caughtUp waits until the hops have acked every input (a run's output
// can be seen before its hop has stored its audit message and acked) and
// the projector has handled every audit message, or one of them failed.
func (r *skeletonRig) caughtUp(ctx context.Context, hops, proj jetstream.Consumer) (time.Duration, error) {
	start := time.Now()
	for _, c := range []jetstream.Consumer{hops, proj} {
		for {
			if err := r.err(); err != nil {
				return 0, err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return 0, err
			}
			if info.NumPending == 0 && info.NumAckPending == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return time.Since(start), nil
}
