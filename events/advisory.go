package events

import (
	"context"
	"fmt"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
)

// maxDeliveriesAdvisory is the part of JetStream's MAX_DELIVERIES advisory
// the worker reads.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchMaxDeliveries dead-letters messages JetStream gave up on without the
// handler seeing a last delivery, for example when every delivery timed out
// because the worker holding it crashed. Every process of the role receives
// the advisory; the dead letter's derived id makes the copies one.
func (w *Worker) watchMaxDeliveries(ctx context.Context) (stop func(), err error) {
	subject := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", w.stream, w.durable)
	sub, err := w.js.Conn().Subscribe(subject, func(m *nats.Msg) {
		var adv maxDeliveriesAdvisory
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			w.report(nil, subject, fmt.Errorf("events: advisory: %w", err))
			return
		}
		w.deadLetterStored(ctx, adv)
	})
	if err != nil {
		return nil, fmt.Errorf("events: subscribe %s: %w", subject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

func (w *Worker) deadLetterStored(ctx context.Context, adv maxDeliveriesAdvisory) {
	stream, err := w.js.Stream(ctx, adv.Stream)
	if err != nil {
		w.report(nil, "", fmt.Errorf("events: advisory stream: %w", err))
		return
	}
	raw, err := stream.GetMsg(ctx, adv.StreamSeq)
	if err != nil {
		w.report(nil, "", fmt.Errorf("events: advisory message %d: %w", adv.StreamSeq, err))
		return
	}
	reason := fmt.Sprintf("max deliveries (%d) reached by consumer %s without an ack", adv.Deliveries, adv.Consumer)
	dl := DeadLetterEvent(w.cfg.Role, adv.Stream, adv.StreamSeq, adv.Deliveries, raw.Subject, raw.Header, raw.Data, reason, true)
	if err := Publish(ctx, w.js, dl); err != nil {
		w.report(nil, raw.Subject, err)
	}
}
