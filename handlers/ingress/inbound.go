package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
)

// inboundBackoff are the redelivery delays of an inbound event after a
// transient failure (store, limits, publish), by delivery.
var inboundBackoff = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}

// inboundTimeout bounds the handling of one inbound event.
const inboundTimeout = 20 * time.Second

// ServeInbound consumes the inbound events of every tenant from cons (the
// durable InboundConsumer) until ctx ends, then drains. Each event is
// handled as POST /agent/events handles its body (startTriggered), with
// the tenant its subject names, one at a time in stream order:
//
//   - started, not matched, refused by the session, or invalid once a
//     trigger matched: the evaluation is recorded and the message acked;
//   - refused by the request limits: recorded, and redelivered after the
//     limits' Retry-After (NAK with that delay), not dropped;
//   - a transient failure (the store, the limits, a publish, the record):
//     redelivered with a backoff; the consumer's deliveries are unlimited;
//   - malformed (not JSON, unknown fields, no event id or type, a subject
//     whose tenant token is not a valid tenant): dead-lettered on its
//     first delivery with its reason (agent.dead.<tenant>), and the
//     consumer goes on with the next.
func (g *Ingress) ServeInbound(ctx context.Context, cons jetstream.Consumer) error {
	work := context.WithoutCancel(ctx) // drained messages are finished, not cut
	cc, err := cons.Consume(func(msg jetstream.Msg) { g.inboundMsg(work, msg) },
		jetstream.PullMaxMessages(16), jetstream.PullExpiry(events.PullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			g.log.Debug().Err(err).Msg("inbound consumer")
		}))
	if err != nil {
		return fmt.Errorf("handlers: consume inbound events: %w", err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
}

// ParseInbound decodes the body of an inbound event published on
// subject: the JSON object POST /agent/events takes (unknown fields
// refused), with an event id, the tenant the subject names. An error is
// the reason the event is dead-lettered.
func ParseInbound(subject string, data []byte) (tenant string, in InboundEvent, err error) {
	tenant, ok := strings.CutPrefix(subject, handlers.InboundSubjectRoot+".")
	if !ok || strings.Contains(tenant, ".") || orch.ValidateID("tenant_id", tenant) != nil || !events.ValidToken(tenant) {
		return "", in, fmt.Errorf("subject %q names no valid tenant (%s.<tenant>, [A-Za-z0-9_-]{1,64})", subject, handlers.InboundSubjectRoot)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return tenant, in, fmt.Errorf("body: %v", err)
	}
	if err := dec.Decode(new(json.RawMessage)); !errors.Is(err, io.EOF) {
		return tenant, in, errors.New("body: more than one JSON value")
	}
	if in.EventID == "" {
		return tenant, in, errors.New("event_id is required (it makes the event's run idempotent)")
	}
	if code, _, msg := validateInbound(&in); code != "" {
		return tenant, in, fmt.Errorf("%s: %s", code, msg)
	}
	return tenant, in, nil
}

// inboundMsg handles one inbound message; see ServeInbound.
func (g *Ingress) inboundMsg(ctx context.Context, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		_ = msg.Term()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, inboundTimeout)
	defer cancel()
	stop := heartbeat(msg, 5*time.Second)
	defer stop()
	tenant, in, err := ParseInbound(msg.Subject(), msg.Data())
	if err != nil {
		g.deadLetterInbound(ctx, msg, md, err)
		return
	}
	t := g.startTriggered(ctx, tenant, in, SourceNATS)
	if t.Err == nil {
		if err := g.recordEvaluation(ctx, tenant, in.UserID, t.Eval); err != nil {
			t.Err = fmt.Errorf("record the evaluation: %w", err)
		}
	}
	log := g.log.With().Str("tenant_id", tenant).Str("event_id", in.EventID).Logger()
	switch {
	case t.Err != nil:
		// Nothing is lost: the event is evaluated again, and its run id
		// is its event's, so a run already requested is not repeated.
		log.Warn().Err(t.Err).Uint64("delivered", md.NumDelivered).Msg("inbound event retried")
		_ = msg.NakWithDelay(inboundBackoff[min(int(md.NumDelivered), len(inboundBackoff))-1])
	case t.Eval.Outcome == OutcomeLimited:
		log.Info().Str("code", t.Code).Dur("retry_after", t.RetryAfter).Msg("inbound event limited; redelivered later")
		_ = msg.NakWithDelay(max(t.RetryAfter, time.Second))
	case t.Eval.Outcome == OutcomeInvalid:
		g.deadLetterInbound(ctx, msg, md, fmt.Errorf("%s: %s", t.Code, t.Message))
	default:
		if err := msg.Ack(); err != nil {
			// A redelivery is evaluated again and starts no second run.
			log.Warn().Err(err).Msg("ack an inbound event")
		}
	}
}

// deadLetterInbound moves a malformed inbound message to
// agent.dead.<tenant> with its reason and bytes, then terminates it; if
// the dead letter cannot be stored the message is redelivered instead.
func (g *Ingress) deadLetterInbound(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, reason error) {
	g.log.Warn().Str("subject", msg.Subject()).Str("reason", reason.Error()).Msg("inbound event dead-lettered")
	// An inbound event belongs to no run: a run header its publisher set
	// must not make the dead letter end one (the router ends the run a
	// dead letter names).
	headers := map[string][]string{}
	for k, v := range msg.Headers() {
		if !strings.EqualFold(k, "ce-"+events.ExtRun) {
			headers[k] = v
		}
	}
	dl := events.DeadLetterEvent(handlers.RoleInbound, md.Stream, md.Sequence.Stream, md.NumDelivered, msg.Subject(), headers, msg.Data(),
		reason.Error(), false)
	if err := events.Publish(ctx, g.js, dl); err != nil {
		g.log.Error().Err(err).Str("subject", msg.Subject()).Msg("store a dead letter")
		_ = msg.NakWithDelay(inboundBackoff[min(int(md.NumDelivered), len(inboundBackoff))-1])
		return
	}
	_ = msg.TermWithReason(reason.Error()[:min(len(reason.Error()), 200)])
}

// heartbeat tells JetStream the message is being worked on, every
// interval, until stop is called.
func heartbeat(msg jetstream.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}
