package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/handlers"
)

// Census counts what a sequential 5-step run costs the server in
// messages: the records it stores, by stream (a KV bucket is the stream
// KV_<bucket>), and every message a client sends, by kind. Where a hop's
// time goes is mostly these round trips and the work each costs both
// sides.
type Census struct {
	Runs int `json:"runs"`
	// RecordsPerRun is what each stream stored per run; Records the sum.
	RecordsPerRun map[string]float64 `json:"records_per_run"`
	Records       float64            `json:"records"`
	// SentPerRun counts the messages the clients sent per run, by kind:
	// publish.<stream>, kv.write.<bucket>, kv.read.<bucket>, ack.<stream>,
	// pull.<stream>, other; Sent is the sum.
	SentPerRun map[string]float64 `json:"sent_per_run"`
	Sent       float64            `json:"sent"`
	// BytesPerRun is the bytes the clients sent per run, payloads and
	// headers, by the same kinds; Bytes the sum. What a hop copies,
	// encodes, decodes and writes grows with it.
	BytesPerRun map[string]float64 `json:"bytes_per_run"`
	Bytes       float64            `json:"bytes"`
	// FiredPerRun counts, of RecordsPerRun, the records the server stored
	// itself, by stream: scheduled messages (an alert evaluation, a
	// deadline) that fell due during the count, which no client sent.
	FiredPerRun map[string]float64 `json:"fired_per_run,omitempty"`
}

// census runs n sequential pipeline runs, after a warm-up, while a
// monitor connection subscribed to every subject counts what the clients
// send, and reads the streams' last sequences before and after.
func census(ctx context.Context, srv *benchServer, n int) (Census, error) {
	d, err := deploy(ctx, srv, deployConfig{tcp: true, executors: 1, model: newPipelineModel()})
	if err != nil {
		return Census{}, err
	}
	defer d.close()
	for range max(n/10, 2) {
		if _, _, err := d.run(ctx, pipeline.Task); err != nil {
			return Census{}, err
		}
	}
	// The streams' sequences are read before the monitor subscribes (once
	// the warm-up's trails are stored) and after it unsubscribes, so the
	// census's own requests are not counted.
	if _, err := d.projectorIdle(ctx); err != nil {
		return Census{}, err
	}
	before, _, err := lastSeqs(ctx, d)
	if err != nil {
		return Census{}, err
	}
	mon, err := nats.Connect(srv.srv.ClientURL(), nats.Name("agentbus-bench-census"))
	if err != nil {
		return Census{}, err
	}
	defer mon.Close()
	var mu sync.Mutex
	sent, bytes := map[string]int{}, map[string]int{}
	sub, err := mon.Subscribe(">", func(m *nats.Msg) {
		k := sentKind(m.Subject, m.Reply)
		mu.Lock()
		sent[k]++
		bytes[k] += len(m.Data) + headerBytes(m.Header)
		mu.Unlock()
	})
	if err != nil {
		return Census{}, err
	}
	if err := mon.Flush(); err != nil {
		return Census{}, err
	}
	for range n {
		if _, _, err := d.run(ctx, pipeline.Task); err != nil {
			return Census{}, err
		}
	}
	// The runs' trails are stored (and acknowledged) before the count
	// ends; the census's own polls of the projector are not counted.
	polls, err := d.projectorIdle(ctx)
	if err != nil {
		return Census{}, err
	}
	// Drained, not unsubscribed: the messages the monitor received but
	// has not counted yet are counted before the count ends.
	closed := sub.StatusChanged(nats.SubscriptionClosed)
	if err := sub.Drain(); err != nil {
		return Census{}, err
	}
	select {
	case <-closed:
	case <-ctx.Done():
		return Census{}, ctx.Err()
	}
	mu.Lock()
	sent["other"] -= polls
	mu.Unlock()
	after, scheduling, err := lastSeqs(ctx, d)
	if err != nil {
		return Census{}, err
	}
	c := Census{Runs: n, RecordsPerRun: map[string]float64{}, SentPerRun: map[string]float64{}, BytesPerRun: map[string]float64{},
		FiredPerRun: map[string]float64{}}
	for name, seq := range after {
		if dlt := float64(seq-before[name]) / float64(n); dlt > 0 {
			c.RecordsPerRun[name] = dlt
			c.Records += dlt
		}
		if !scheduling[name] {
			continue
		}
		f, err := fired(ctx, d.js, name, before[name], seq)
		if err != nil {
			return Census{}, err
		}
		if f > 0 {
			c.FiredPerRun[name] = float64(f) / float64(n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k, v := range sent {
		if k == "" {
			continue // replies and deliveries: the server's, not a client's
		}
		c.SentPerRun[k] = float64(v) / float64(n)
		c.Sent += c.SentPerRun[k]
		if b := bytes[k]; b > 0 {
			c.BytesPerRun[k] = float64(b) / float64(n)
			c.Bytes += c.BytesPerRun[k]
		}
	}
	return c, nil
}

// headerBytes is what h takes on the wire: a status line, then a
// "name: value" line for each value, then an empty line.
func headerBytes(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}

// fired counts the messages of stream after sequence from up to to that
// the server stored when a scheduled message fell due: they carry the
// Nats-Scheduler header. It reads headers only; a range whose last
// messages were removed since (a fired schedule is purged) ends when a
// fetch finds nothing more.
func fired(ctx context.Context, js jetstream.JetStream, stream string, from, to uint64) (int, error) {
	if to <= from {
		return 0, nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from + 1, HeadersOnly: true,
	})
	if err != nil {
		return 0, fmt.Errorf("census of %s: %w", stream, err)
	}
	n := 0
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return 0, fmt.Errorf("census of %s: %w", stream, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return 0, fmt.Errorf("census of %s: %w", stream, err)
			}
			if meta.Sequence.Stream > to {
				return n, nil
			}
			if m.Headers().Get(jetstream.SchedulerHeader) != "" {
				n++
			}
			if meta.Sequence.Stream == to {
				return n, nil
			}
		}
		if err := batch.Error(); err != nil {
			return 0, fmt.Errorf("census of %s: %w", stream, err)
		}
		if got == 0 {
			return n, nil
		}
	}
}

// lastSeqs is the last sequence of every stream, and the names of those
// that hold scheduled messages.
func lastSeqs(ctx context.Context, d *deployment) (map[string]uint64, map[string]bool, error) {
	out, scheduling := map[string]uint64{}, map[string]bool{}
	l := d.js.ListStreams(ctx)
	for si := range l.Info() {
		out[si.Config.Name] = si.State.LastSeq
		scheduling[si.Config.Name] = si.Config.AllowMsgSchedules
	}
	return out, scheduling, l.Err()
}

// sentKind is the kind of a message a client sent on subject, or "" for
// one the server sent (a reply, or a consumer's delivery, which keeps its
// subject and has the ack subject as its reply).
func sentKind(subject, reply string) string {
	t := strings.Split(subject, ".")
	switch {
	case strings.HasPrefix(subject, "_INBOX.") || strings.HasPrefix(subject, "$JS.EVENT.") || strings.HasPrefix(subject, "$SYS.") ||
		strings.HasPrefix(reply, "$JS.ACK."):
		return ""
	case strings.HasPrefix(subject, "$JS.ACK.") && len(t) > 2:
		return "ack." + t[2]
	case strings.HasPrefix(subject, "$JS.API.DIRECT.GET.") && len(t) > 4:
		return "kv.read." + strings.TrimPrefix(t[4], "KV_")
	case strings.HasPrefix(subject, "$JS.API.CONSUMER.MSG.NEXT.") && len(t) > 5:
		return "pull." + t[5]
	case strings.HasPrefix(subject, "$KV.") && len(t) > 1:
		return "kv.write." + t[1]
	case strings.HasPrefix(subject, "$JS."):
		return "other"
	case len(t) > 0 && t[0] == "agent":
		return "publish.AGENT"
	case len(t) > 0 && t[0] == "store":
		return "publish.STORE_EVENTS"
	case len(t) > 0 && t[0] == "reply":
		return "publish.REPLY"
	}
	return "other"
}

// print writes the census as two rows of sorted counts.
func (c Census) print(w io.Writer) {
	if c.Runs == 0 {
		return
	}
	list := func(m map[string]float64) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "census (%d sequential runs): %.1f records a run: %s\n", c.Runs, c.Records, list(c.RecordsPerRun))
	if len(c.FiredPerRun) > 0 {
		fmt.Fprintf(w, "census: of those, stored by the server as scheduled messages fell due: %s\n", list(c.FiredPerRun))
	}
	fmt.Fprintf(w, "census: %.1f messages sent by the clients a run: %s\n", c.Sent, list(c.SentPerRun))
	kb := map[string]float64{}
	for k, v := range c.BytesPerRun {
		kb[k] = v / 1024
	}
	fmt.Fprintf(w, "census: %.1f KiB (payloads and headers) sent by the clients a run: %s\n", c.Bytes/1024, list(kb))
}

// projectorIdle waits until the projector has handled and acknowledged
// every message stored so far, and returns how many requests it made.
func (d *deployment) projectorIdle(ctx context.Context) (int, error) {
	role, _ := app.RoleNamed(handlers.RoleProjector)
	c := role.Consumer()
	cons, err := d.js.Consumer(ctx, c.Stream, c.Name)
	if err != nil {
		return 0, fmt.Errorf("projector consumer: %w", err)
	}
	for polls := 1; ; polls++ {
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("projector consumer: %w", err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return polls, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
