package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// errCodeBatchDuplicate is the server's answer to an atomic batch holding
// a message id it has already stored (nats-server 2.12+).
const errCodeBatchDuplicate jetstream.ErrorCode = 10201

// Publisher publishes the outputs of one hop. The outputs bound for one
// stream are published as one atomic batch (nats-server 2.12+), so they
// are all stored or none, when the stream allows it and batches are cheap
// there: a replicated or in-memory stream. A single-replica file stream
// stages every batch in a file store of its own, which costs milliseconds
// per hop, so there the outputs are pipelined instead; a redelivered input
// then re-publishes the same derived ids and the duplicate window keeps
// one copy of each. Across streams (AGENT and REPLY) the batches go
// concurrently and the redelivery completes a hop one of them missed.
// The hop's audit trail rides in its first output on AGENT (HeaderTrail).
type Publisher struct {
	js     jetstream.JetStream
	mu     sync.Mutex
	atomic map[string]bool // by stream
}

// NewPublisher returns a publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher {
	return &Publisher{js: js, atomic: map[string]bool{}}
}

// PublishAll publishes outs and returns once each is stored. A message the
// stream already holds (same id within the duplicate window) counts as
// stored.
func (p *Publisher) PublishAll(ctx context.Context, outs []event.Event) error {
	switch len(outs) {
	case 0:
		return nil
	case 1:
		return Publish(ctx, p.js, outs[0]) // bounded by CallTimeout itself
	}
	// A PubAck lost with a dying server fails the hop in CallTimeout
	// instead of holding it for its whole deadline.
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	var streams []string
	byStream := map[string][]*nats.Msg{}
	ids := make(map[string]bool, len(outs))
	add := func(m *nats.Msg) {
		s := StreamOfSubject(m.Subject)
		if _, ok := byStream[s]; !ok {
			streams = append(streams, s)
		}
		byStream[s] = append(byStream[s], m)
	}
	var audits []event.Event
	var carrier *nats.Msg // the hop's first output on AGENT that is not scheduled
	for _, out := range outs {
		if ids[out.ID()] {
			return Permanent(fmt.Errorf("%w: two outputs of one hop share the id %s", ErrPublish, out.ID()))
		}
		ids[out.ID()] = true
		if IsAuditType(out.Type()) {
			audits = append(audits, out)
			continue
		}
		m, err := ToMsg(out)
		if err != nil {
			return Permanent(err)
		}
		if carrier == nil && carries(out, m.Subject) {
			carrier = m
		}
		add(m)
	}
	if len(audits) > 0 {
		// The hop's audit trail rides in its first output: one message
		// stores both. A hop with nothing to carry it publishes it alone.
		if carrier != nil {
			if err := attachTrail(carrier, audits); err != nil {
				return Permanent(err)
			}
		} else {
			m, err := packAudit(audits)
			if err != nil {
				return Permanent(err)
			}
			add(m)
		}
	}
	// Batches go concurrently; every other message is sent before any
	// PubAck is awaited, so a hop costs about one round trip either way.
	errs := make([]error, len(streams)+1)
	var wg sync.WaitGroup
	var piped []*nats.Msg
	for i, s := range streams {
		msgs := byStream[s]
		if len(msgs) > 1 && p.batches(ctx, s) {
			wg.Go(func() { errs[i] = p.batch(ctx, s, msgs) })
			continue
		}
		piped = append(piped, msgs...)
	}
	errs[len(streams)] = p.pipeline(ctx, piped)
	wg.Wait()
	return errors.Join(errs...)
}

// carries reports whether out, an output that is not an audit event,
// published on subject, can carry its hop's trail: it goes to AGENT and
// is not scheduled.
func carries(out event.Event, subject string) bool {
	return StreamOfSubject(subject) == StreamAgent && Ext(out, ExtDeliverAt) == ""
}

// CarrierOf returns the output of a hop's outputs outs that PublishAll
// makes carry the hop's audit trail (HeaderTrail): the first that is not
// an audit event, goes to AGENT and is not scheduled. ok is false when
// none can, and the trail is published on its own (TrailSubject).
func CarrierOf(outs []event.Event) (carrier event.Event, ok bool) {
	for _, out := range outs {
		if IsAuditType(out.Type()) {
			continue
		}
		if subject, err := subjectOf(out); err == nil && carries(out, subject) {
			return out, true
		}
	}
	return carrier, false
}

// batches reports whether stream takes atomic batches cheaply.
func (p *Publisher) batches(ctx context.Context, stream string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok, known := p.atomic[stream]; known {
		return ok
	}
	st, err := p.js.Stream(ctx, stream)
	if err != nil {
		return false // pipelined; asked again next time
	}
	c := st.CachedInfo().Config
	ok := c.AllowAtomicPublish && (c.Replicas > 1 || c.Storage == jetstream.MemoryStorage)
	p.atomic[stream] = ok
	return ok
}

// batch publishes msgs as one atomic batch: one round trip, acked on the
// commit. A batch refused because the stream already holds one of its ids
// was stored by an earlier attempt at the same input: batches are atomic
// and a hop's ids are derived, so that attempt stored all of them.
func (p *Publisher) batch(ctx context.Context, stream string, msgs []*nats.Msg) error {
	_, err := jetstreamext.PublishMsgBatch(ctx, p.js, msgs, jetstreamext.BatchFlowControl{AckFirst: false})
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchDuplicate {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: batch of %d to %s: %v", ErrPublish, len(msgs), stream, err)
	}
	return nil
}

// pipeline sends every message, then awaits every PubAck, so several
// outputs cost about one round trip.
func (p *Publisher) pipeline(ctx context.Context, msgs []*nats.Msg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := p.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("%w: %s %s: %v", ErrPublish, m.Subject, m.Header.Get(jetstream.MsgIDHeader), err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("%w: %s: %v", ErrPublish, f.Msg().Subject, err)
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrPublish, ctx.Err())
		}
	}
	return nil
}

// StreamOfSubject names the stream that stores subject.
func StreamOfSubject(subject string) string {
	if root, _, _ := strings.Cut(subject, "."); root == replySubjectRoot {
		return StreamReply
	}
	return StreamAgent
}
