package events

import (
	"context"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// Timeout bounds each handler call with a deadline derived from its
// context. A handler that overruns returns a transient error and the
// message is redelivered with backoff.
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, ev)
		}
	}
}
