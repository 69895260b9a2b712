package handlers

import (
	"context"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
)

// Logging logs every handled event with its run, tenant and session, the
// outcome and the duration. It never logs payloads, so secrets in data
// cannot reach a log line.
func Logging(log zerolog.Logger) events.Middleware {
	return func(next events.Handler) events.Handler {
		return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
			start := time.Now()
			outs, err := next(ctx, ev)
			m := events.MetaOf(ev)
			l := log.Debug()
			if err != nil {
				l = log.Warn().Err(err).Bool("permanent", events.IsPermanent(err))
			}
			l.Str("type", ev.Type()).Str("event_id", ev.ID()).Str("run_id", m.Run).Str("tenant_id", m.Tenant).
				Str("session_id", m.Session).Int("outputs", len(outs)).Dur("took", time.Since(start)).Msg("handled")
			return outs, err
		}
	}
}
